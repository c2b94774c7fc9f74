"""One page of the chart grid, header to readout, as a pure function of the jobs, the grid's
view and the size: what the grid screen draws, and what bench/grid.py times."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from distcore.jobs.snapshots import Job
from distcore.textsafe import terminal_text
from distmon.render.grid import Shown, grid_rows, legend, readout
from distmon.render.grid_model import GridChart, GridMemory, grid_charts, grid_tags
from distmon.render.grid_state import FOOTER, HEADER, GridState, grid_shape, page_of, per_page

HINT = ("←/→ cursor  [ ] zoom in/out  enter maximise  o outliers  / filter  "
        "pgup/pgdn page  tab next  +/- smoothing  v back")


def span_of(state: GridState) -> tuple[float, float] | None:
    return state.zooms[-1] if state.zooms else None


def focused_chart(
    jobs: Sequence[Job], state: GridState, memory: GridMemory
) -> GridChart | None:
    tags = grid_tags(jobs, state.pattern)
    if not tags:
        return None
    return grid_charts(jobs, [tags[min(state.focus, len(tags) - 1)]], state.smoothing, memory)[0]


def draw_page(
    jobs: Sequence[Job], state: GridState, width: int, height: int, memory: GridMemory,
    color: bool,
) -> Text:
    """`height` lines: what is shown, the page's charts, the legend, the readout."""
    tags = grid_tags(jobs, state.pattern)
    size = per_page(state, width, height)
    focus = min(state.focus, max(len(tags) - 1, 0))
    page = page_of(state.replace(focus=focus), size)
    charts = grid_charts(jobs, tags[page * size:(page + 1) * size], state.smoothing, memory)
    cols, rows = _filled(len(charts), (1, 1) if state.maximised else grid_shape(width, height))
    shown = [_shown(state, color, page * size + i == focus) for i in range(len(charts))]
    chart_height = (height - HEADER - FOOTER) // rows
    lines = [Text(_header(jobs, state, len(tags), page, size), style="bold")]
    lines += grid_rows(charts, cols, width // cols, chart_height, shown, memory)
    lines += [Text() for _ in range(height - FOOTER - len(lines))]
    how = f"ema {state.smoothing:g} " + ("over faint raw" if color else "(←/→: raw values)")
    lines.append(legend(memory.legend(jobs), color, how))
    lines += _readout(charts, focus - page * size, state)
    lines += [Text() for _ in range(height - len(lines))]
    for line in lines:
        line.truncate(width)
    out = Text("\n").join(lines[:height])
    out.no_wrap, out.overflow = True, "crop"  # each line fitted: nothing to wrap (costly)
    return out


def _filled(charts: int, shape: tuple[int, int]) -> tuple[int, int]:
    """The grid's shape for a page of `charts`: fewer charts than places grow to fill it."""
    cols = max(1, min(shape[0], charts))
    return cols, max(1, min(shape[1], -(-charts // cols)))


def _shown(state: GridState, color: bool, focused: bool) -> Shown:
    return Shown(color=color, focused=focused, span=span_of(state) if focused else None,
                 ignore_outliers=state.ignore_outliers,
                 cursor=state.cursor if focused else None)


def _header(jobs: Sequence[Job], state: GridState, tags: int, page: int, size: int) -> str:
    names = terminal_text(", ".join(j.name for j in jobs) or "no job", 60)
    pages = max(1, -(-tags // size))
    parts = [f"charts of {names}", f"{tags} tag{'' if tags == 1 else 's'}",
             f"page {page + 1}/{pages}", f"ema {state.smoothing:g}"]
    if state.pattern:
        parts.append(f"tags /{terminal_text(state.pattern, 40)}/")
    if state.ignore_outliers:
        parts.append("outliers ignored")
    if state.zooms:
        low, high = state.zooms[-1]
        parts.append(f"zoom {low:g}–{high:g}")
    return " · ".join(parts)


def _readout(charts: Sequence[GridChart], at: int, state: GridState) -> list[Text]:
    """The cursor's values in the focused chart (a line a run), else the keys."""
    if state.cursor is None or not 0 <= at < len(charts):
        return [Text(HINT, style="dim", no_wrap=True)]
    lines = readout(charts[at], state.cursor, span_of(state))
    more = len(lines) - (FOOTER - 1)
    if more > 0:
        lines = [*lines[:FOOTER - 2], f"… {more + 1} more runs"]
    return [Text(line, no_wrap=True) for line in lines]
