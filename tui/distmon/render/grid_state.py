"""The chart grid's view: which tags, which page and chart, the cursor and the zoom, as one
frozen value that every key replaces through a pure transition (tested as tables)."""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from distcore.smoothing import DEFAULT_WEIGHT, WEIGHT_STEP, adjust_weight

MIN_WIDTH: Final = 52  # columns of one chart at least: its y labels and a readable plot
MIN_HEIGHT: Final = 13  # lines of one chart at least: its title, plot and x axis
HEADER: Final = 1  # lines above the charts: what the grid shows
FOOTER: Final = 4  # lines below: the legend and the cursor's readout


@dataclass(frozen=True)
class GridState:
    pattern: str = ""  # the tag filter (a regular expression)
    focus: int = 0  # the focused chart, among the filtered tags
    maximised: bool = False
    ignore_outliers: bool = False
    smoothing: float = DEFAULT_WEIGHT
    cursor: float | None = None  # the x the focused chart's cursor reads at
    zooms: tuple[tuple[float, float], ...] = ()  # the focused chart's step ranges, last shown

    def replace(self, **changes: object) -> GridState:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def grid_shape(width: int, height: int) -> tuple[int, int]:
    """(columns, rows) of charts that fit `width` x `height` cells (at least one)."""
    return max(1, width // MIN_WIDTH), max(1, (height - HEADER - FOOTER) // MIN_HEIGHT)


def per_page(state: GridState, width: int, height: int) -> int:
    cols, rows = grid_shape(width, height)
    return 1 if state.maximised else cols * rows


def page_of(state: GridState, size: int) -> int:
    return state.focus // max(size, 1)


def focused(state: GridState, delta: int, total: int) -> GridState:
    """Another chart focused (clamped); its cursor and zoom start afresh."""
    focus = min(max(state.focus + delta, 0), max(total - 1, 0))
    return state if focus == state.focus else state.replace(focus=focus, cursor=None, zooms=())


def paged(state: GridState, delta: int, total: int, size: int) -> GridState:
    """The first chart of the page `delta` pages on (clamped)."""
    page = min(max(page_of(state, size) + delta, 0), max(total - 1, 0) // max(size, 1))
    return focused(state, page * size - state.focus, total)


def with_pattern(state: GridState, pattern: str) -> GridState:
    return state.replace(pattern=pattern, focus=0, cursor=None, zooms=())


def toggled_maximised(state: GridState) -> GridState:
    return state.replace(maximised=not state.maximised)


def toggled_outliers(state: GridState) -> GridState:
    return state.replace(ignore_outliers=not state.ignore_outliers)


def smoothed(state: GridState, direction: int) -> GridState:
    return state.replace(smoothing=adjust_weight(state.smoothing, direction * WEIGHT_STEP))


def moved_cursor(state: GridState, xs: Sequence[float], delta: int) -> GridState:
    """The cursor `delta` points on among the chart's x values (sorted, distinct, the zoom's);
    it starts at the newest."""
    if not xs:
        return state
    if state.cursor is None:
        return state.replace(cursor=xs[-1])
    at = bisect.bisect_left(xs, state.cursor)
    return state.replace(cursor=xs[min(max(at + delta, 0), len(xs) - 1)])


def zoomed_in(state: GridState, xs: Sequence[float]) -> GridState:
    """Half the shown step range, around the cursor (else its middle); two points at least."""
    if len(xs) < 3:
        return state
    low, high = xs[0], xs[-1]
    centre = state.cursor if state.cursor is not None else (low + high) / 2
    quarter = (high - low) / 4
    start = max(low, min(centre - quarter, high - 2 * quarter))
    new = (start, start + 2 * quarter)
    inside = bisect.bisect_right(xs, new[1]) - bisect.bisect_left(xs, new[0])
    return state if inside < 2 else state.replace(zooms=(*state.zooms, new))


def zoomed_out(state: GridState) -> GridState:
    return state.replace(zooms=state.zooms[:-1])
