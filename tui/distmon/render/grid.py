"""The chart grid as text: charts side by side, a legend, and the cursor's readout, as pure
functions the dashboard's grid screen and `distmon --once --plot` both draw with.

Each chart is the braille renderer's (distmon.render.braille): in colour, each run's raw points
faint under its smoothed curve, in the run's colour; without colour, the smoothed curves alone
in the runs' line styles, which the legend names in words.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.style import Style
from rich.text import Text

from distcore.textsafe import terminal_text
from distmon.formats import number
from distmon.render.braille import ChartLook, render_chart
from distmon.render.curve import Curve
from distmon.render.grid_model import DASHES, GridChart, GridMemory, Trace

OUTLIERS = (0.05, 0.95)  # the quantiles a y axis spans when outliers are ignored (TensorBoard's)
TITLE_LIMIT = 120


@dataclass(frozen=True)
class Shown:
    """How one chart is drawn: colour or line styles, its step range, outliers, cursor."""

    color: bool = True
    focused: bool = False
    span: tuple[float, float] | None = None
    ignore_outliers: bool = False
    cursor: float | None = None


def window(trace: Trace, span: tuple[float, float] | None) -> Trace:
    """The trace's points within the step range `span` (all of them: None)."""
    if span is None:
        return trace
    import numpy as np

    xs = np.asarray(trace.xs)
    keep = (xs >= span[0]) & (xs <= span[1])
    xs, raw, smooth, walls = (np.asarray(a)[keep]
                              for a in (trace.xs, trace.raw, trace.smooth, trace.walls))
    return dataclasses.replace(trace, xs=xs, raw=raw, smooth=smooth, walls=walls)


def x_values(chart: GridChart, span: tuple[float, float] | None = None) -> list[float]:
    """Every x of the chart's traces within `span`, sorted, each once: where a cursor stops."""
    import numpy as np

    arrays = [np.asarray(window(t, span).xs, dtype=np.float64) for t in chart.traces]
    if not arrays:
        return []
    values: list[float] = np.unique(np.concatenate(arrays)).tolist()
    return values


def y_range(traces: Sequence[Trace]) -> tuple[float, float] | None:
    """The y range that leaves outliers out: the 5th to 95th percentile of every value shown."""
    import numpy as np

    values = np.concatenate([np.asarray(a, dtype=np.float64)
                             for t in traces for a in (t.raw, t.smooth)] or [np.empty(0)])
    values = values[np.isfinite(values)]
    if len(values) < 2:
        return None
    low, high = (float(v) for v in np.quantile(values, OUTLIERS))
    pad = (high - low) * 0.05
    return (low - pad, high + pad) if high > low else None


def chart_lines(chart: GridChart, width: int, height: int, shown: Shown) -> list[Text]:
    """One chart in `height` lines of `width` cells: its title, then the plot."""
    traces = [window(t, shown.span) for t in chart.traces]
    title = Text(terminal_text(f"{chart.tag} · {chart.axis}", TITLE_LIMIT),
                 style="bold reverse" if shown.focused else "bold")
    curves, styles, dashes = _curves(traces, shown.color)
    look = ChartLook(styles=tuple(styles), dashes=None if shown.color else tuple(dashes),
                     y_range=y_range(traces) if shown.ignore_outliers else None,
                     cursor=shown.cursor)
    body = render_chart(curves, width, height - 1, mode="step", look=look) if curves else (
        Text("no points in this range", style="dim"))
    return _fitted([title, *body.split("\n")], width, height)


def _curves(traces: Sequence[Trace], color: bool) -> tuple[list[Curve], list[Style], list[int]]:
    """In colour: every raw series (faint) first, then every smoothed one over them; without:
    the smoothed ones, each in its run's line style."""
    curves, styles, dashes = [], [], []
    for trace in traces if color else ():
        curves.append(Curve(trace.label, trace.xs, trace.raw, 0, dim=True))
        styles.append(Style(color=trace.colour, dim=True))
        dashes.append(DASHES[0][0])
    for trace in traces:
        curves.append(Curve(trace.label, trace.xs, trace.smooth, 0))
        styles.append(Style(color=trace.colour) if color else Style())
        dashes.append(DASHES[trace.dash % len(DASHES)][0])
    return curves, styles, dashes


def _fitted(lines: Sequence[Text], width: int, height: int) -> list[Text]:
    out = [line.copy() for line in lines[:height]]
    out += [Text() for _ in range(height - len(out))]
    for line in out:
        line.truncate(width, pad=True)
    return out


def grid_rows(charts: Sequence[GridChart], cols: int, width: int, height: int,
              shown: Sequence[Shown], memory: GridMemory | None = None) -> list[Text]:
    """The charts `cols` a row, each `width` x `height` cells and a column apart; a chart
    drawn before from the same series, size and look is `memory`'s."""
    lines: list[Text] = []
    for first in range(0, len(charts), cols):
        drawn = [_drawn(c, width - 1, height, s, memory)
                 for c, s in zip(charts[first:first + cols], shown[first:first + cols],
                                 strict=True)]
        for parts in zip(*drawn, strict=True):
            lines.append(Text(" ").join(parts))
    return lines


def _drawn(chart: GridChart, width: int, height: int, shown: Shown,
           memory: GridMemory | None) -> list[Text]:
    if memory is None:
        return chart_lines(chart, width, height, shown)
    series = tuple((t.label, t.colour, t.dash, *map(id, (t.xs, t.raw, t.smooth, t.walls)))
                   for t in chart.traces)
    key = ("chart", chart.tag, chart.axis, series, width, height, shown)
    drawn: list[Text] = memory.remember(
        key, chart.traces, lambda: chart_lines(chart, width, height, shown))
    return drawn


def legend(runs: Sequence[tuple[str, str, int]], color: bool, how: str) -> Text:
    """Each run (label, colour, line style) once, in its colour or its line style named in
    words, then `how` the curves are drawn."""
    out = Text(no_wrap=True, overflow="ellipsis")
    for label, colour, dash in runs:
        pattern, name = DASHES[dash % len(DASHES)]
        sample = "━━" if color else "".join("━" if pattern >> i & 1 else " " for i in range(4))
        out.append(sample, style=Style(color=colour) if color else None)
        out.append(f" {label}{'' if color else f' ({name})'}  ")
    out.append(f"({how})" if runs else "no scalar points", style="dim")
    return out


def readout(chart: GridChart, cursor: float, span: tuple[float, float] | None) -> list[str]:
    """For each run of the chart, its point at the cursor (the last one at or before it):
    step (or epoch), raw and smoothed value, and wall time."""
    import numpy as np

    lines = []
    for trace in (window(t, span) for t in chart.traces):
        at = int(np.searchsorted(np.asarray(trace.xs), cursor, side="right")) - 1
        if at < 0:
            continue
        lines.append(f"{trace.label}  {chart.axis} {_x(trace.xs[at])}  "
                     f"value {number(float(trace.raw[at]), 6)}  "
                     f"smoothed {number(float(trace.smooth[at]), 6)}  {_wall(trace.walls[at])}")
    return lines


def _x(value: Any) -> str:
    return str(int(value)) if float(value).is_integer() else f"{float(value):g}"


def _wall(seconds: float) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(seconds)))
    except (OverflowError, OSError, ValueError):
        return f"wall {float(seconds):.6g}"
