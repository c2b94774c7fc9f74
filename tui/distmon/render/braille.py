"""A braille line chart, as a pure function from curves to Rich text.

Why not textual-plotext: it rebuilds the whole chart at every refresh, which for two charts of
full series took more than distmon's share of a core by itself (docs/benchmarks.md). This
renderer maps each point to a 2x4-dot braille cell once, O(points + width).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.style import Style
from rich.text import Text

from distmon.formats import compact
from distmon.render.view_model import Curve, XMode

PALETTE = ("cyan", "magenta", "yellow", "green", "bright_blue", "red", "bright_white")


class ColourBook:
    """Each job's colour for as long as the dashboard runs, so a job keeps its colour on every
    chart and refresh while others come and go (the charts' colours were the jobs' order, so
    a job's colour changed with the selection). A new job takes the next colour in turn; a job
    changes colour only where it would share one with another job on the same chart (then the
    one given its colour last takes the colour least used among them), since two curves in one
    colour cannot be read apart."""

    def __init__(self, size: int = len(PALETTE)) -> None:
        self._size = size  # colours to give (the palette's, unless another is indexed)
        self._colors: dict[str, int] = {}
        self._first: dict[str, int] = {}  # when each name was first given a colour

    def colors(self, names: Sequence[str]) -> dict[str, int]:
        for name in names:
            if name not in self._colors:
                self._first[name] = len(self._first)
                self._colors[name] = self._first[name] % self._size
        used = [0] * self._size
        taken: set[int] = set()
        for name in sorted(names, key=self._first.__getitem__):
            color = self._colors[name]
            if color in taken and len(taken) < self._size:
                color = min((i for i in range(self._size) if i not in taken),
                            key=lambda i: (used[i], i))
                self._colors[name] = color
            taken.add(color)
            used[color] += 1
        return {name: self._colors[name] for name in names}


# Dot bit for (x % 2, y % 4) inside one braille cell (U+2800 + bits).
_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
Y_LABEL_WIDTH = 8


@dataclass(frozen=True)
class Axis:
    """One axis' range over the plottable values (see `dot_scale` for how it maps to dots)."""

    low: float
    high: float

    @property
    def middle(self) -> float:
        return self.low / 2 + self.high / 2  # halves: (low + high) could overflow


@dataclass(frozen=True)
class Frame:
    x: Axis
    y: Axis


@dataclass(frozen=True)
class ChartLook:
    """What the chart grid asks beyond the curves' palette colours: each curve's own style,
    its line pattern (bit i: drawn in the cells whose column % 4 is i), a y range of its own
    (outliers left out: what falls outside is cut), and a cursor column at an x."""

    styles: tuple[Style, ...] | None = None
    dashes: tuple[int, ...] | None = None
    y_range: tuple[float, float] | None = None
    cursor: float | None = None


@dataclass(frozen=True)
class Points:
    """A curve's points as plot coordinates, numpy arrays: `x` and `y` of the points that can
    be plotted, and `at`, their places in the curve (a point between two that are not next to
    each other left a gap)."""

    x: Any
    y: Any
    at: Any
    total: int  # points in the curve, plotted or not

    @property
    def missing(self) -> int:
        return self.total - len(self.at)


def _numbers(values: Sequence[float]) -> Any:
    """The values as an array: a `Column`'s own (no copy), a tuple's converted."""
    import numpy as np

    array = np.asarray(values)
    return array if array.dtype.kind in "iuf" else np.asarray(values, dtype=np.float64)


def plottable(curve: Curve, log_y: bool) -> Points:
    """The curve's points that can be plotted; a point that cannot (a non-finite x or y, a
    y <= 0 on a log scale) leaves a gap, as TensorBoard does. Steps stay integers: they become
    floats in the arithmetic that places them, as float(step) would make them."""
    import numpy as np

    xs, ys = _numbers(curve.xs), _numbers(curve.ys)
    total = min(len(xs), len(ys))
    xs, ys = xs[:total], ys[:total]
    ok = np.isfinite(xs) & np.isfinite(ys)
    if log_y:
        ok &= ys > 0
    at = np.flatnonzero(ok)
    return Points(xs[at], _log10(ys[at]) if log_y else ys[at], at, total)


def _log10(values: Any) -> Any:
    """math.log10 of each value, the one per-point Python step left (log scale only): numpy's
    log10 may differ from the C library's in the last bit (SIMD builds), and a flat line's
    points sit exactly halfway between two dot rows, so one bit would move them."""
    import numpy as np

    return np.fromiter(map(math.log10, values.tolist()), dtype=np.float64, count=len(values))


def _flat(value: float) -> Axis:
    """A range around a single value: a flat line sits in the middle, labelled above and below."""
    pad = 0.5 * (abs(value) or 1.0)
    low, high = value - pad, value + pad
    return Axis(low, high) if math.isfinite(low) and math.isfinite(high) else Axis(value, value)


def chart_frame(prepared: Sequence[Points]) -> Frame | None:
    """The axes around every plottable point (`plottable`'s output per curve); None: none."""
    import numpy as np

    if not any(len(p.at) for p in prepared):
        return None
    xs = np.concatenate([p.x for p in prepared if len(p.at)])
    ys = np.concatenate([p.y for p in prepared if len(p.at)])
    y0, y1 = _first_extreme(ys, np.argmin), _first_extreme(ys, np.argmax)
    frame_x = Axis(_first_extreme(xs, np.argmin), _first_extreme(xs, np.argmax))
    return Frame(frame_x, Axis(y0, y1) if y0 < y1 else _flat(y0))


def _first_extreme(values: Any, arg: Callable[[Any], Any]) -> float:
    """min() or max() as Python's builtins find it: the first of the values that tie (0.0 and
    -0.0 tie, and the sign shows in a label)."""
    return float(values[arg(values)])


def dot_scale(axis: Axis, cells: int) -> tuple[float, float, float, int]:
    """(a, b, k, c) such that dot = round((value * a - b) * k) + c maps the axis onto 0..cells-1.
    Nothing here can overflow or divide by zero, whatever the range:
    plain (a = 1) when the span is a finite float; from halves (a = 0.5) when it overflows
    (-1.7e308..1.7e308); the middle (k = 0) for a single value or a span too small to divide."""
    top = cells - 1
    for a in (1.0, 0.5):
        span = axis.high * a - axis.low * a
        if math.isfinite(span) and span > 0 and math.isfinite(top / span):
            return a, axis.low * a, top / span, 0
    return 0.0, 0.0, 0.0, round(0.5 * top)


def _plot(points: Points, frame: Frame, w: int, h: int) -> Any:
    """The dots that draw one curve's `points`, joined column by column: a (w, h) boolean
    array, computed over arrays (no Python object per point)."""
    import numpy as np

    xa, xb, xk, xc = dot_scale(frame.x, w)
    ya, yb, yk, yc = dot_scale(frame.y, h)
    # round() is half-to-even, as np.rint; the same float operations in the same order.
    px = np.rint((points.x * xa - xb) * xk).astype(np.int64) + xc
    py = (h - 1 - yc) - np.rint((points.y * ya - yb) * yk).astype(np.int64)
    joined = np.flatnonzero(np.diff(points.at) == 1)  # next to each other in the curve: a line
    cols, lows, highs = _joins(px[joined], py[joined], px[joined + 1], py[joined + 1])
    cols, lows, highs = (np.concatenate(p) for p in ((px, cols), (py, lows), (py, highs)))
    return _fill(cols, lows, highs, w, h)


def _joins(ax: Any, ay: Any, bx: Any, by: Any) -> tuple[Any, Any, Any]:
    """The column intervals (x, y from, y to) that join each a to its b: in each of the
    columns from a's next to b's, the rows the line passes through there (floor division,
    as the integer line steps)."""
    import numpy as np

    dx, dy = bx - ax, by - ay
    if not len(dx) or np.abs(dx).max() <= 1:  # the common case, many points a column: b's own
        return bx, np.minimum(ay, by), np.maximum(ay, by)
    span = np.maximum(np.abs(dx), 1)
    segment = np.repeat(np.arange(len(span)), span)
    i = np.arange(len(segment)) - np.repeat(np.cumsum(span) - span, span) + 1
    dx, dy, span, ax, ay = dx[segment], dy[segment], span[segment], ax[segment], ay[segment]
    x = ax + dx * i // span
    y_from, y_to = ay + dy * (i - 1) // span, ay + dy * i // span
    return x, np.minimum(y_from, y_to), np.maximum(y_from, y_to)


def _fill(cols: Any, lows: Any, highs: Any, w: int, h: int) -> Any:
    """The union of the column intervals [low, high] as dots: +1 where one starts, -1 past
    where it ends, summed down each column (a dot outside the plot is dropped, as before)."""
    import numpy as np

    inside = (cols >= 0) & (cols < w)
    # Rows outside the plot (a y range of the caller's cuts outliers) are clipped to its
    # edges: an interval wholly outside becomes empty, its +1 and -1 in one place.
    cols, lows = cols[inside], np.clip(lows[inside], 0, h)
    highs = np.clip(highs[inside] + 1, 0, h)
    size = w * (h + 1)
    edges = np.bincount(cols * (h + 1) + lows, minlength=size)
    edges -= np.bincount(cols * (h + 1) + highs, minlength=size)
    return np.cumsum(edges.reshape(w, h + 1), axis=1)[:, :h] > 0


def x_formatter(mode: XMode) -> Callable[[float], str]:
    if mode == "step":
        return lambda v: f"{v:.0f}" if abs(v) < 1e12 else f"{v:.3g}"
    if mode == "relative":
        return _duration
    return _clock_time


def _clock_time(seconds: float) -> str:
    try:
        return time.strftime("%H:%M:%S", time.localtime(seconds))
    except (OverflowError, OSError, ValueError):  # beyond what the C library can convert
        return f"{seconds:.3g}"


def _duration(seconds: float) -> str:
    if abs(seconds) >= 1e9:
        return f"{seconds:.3g}s"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _y_label(value: float, log_y: bool) -> str:
    shown = _pow10(value) if log_y else value
    text = compact(shown, Y_LABEL_WIDTH - 1, most=3) or "…"
    return text.rjust(Y_LABEL_WIDTH - 1) + "┤"


def _pow10(exponent: float) -> float:
    try:
        return math.pow(10.0, exponent)
    except OverflowError:
        return math.inf


def render_chart(
    curves: Sequence[Curve], width: int, height: int, *, log_y: bool = False,
    mode: XMode = "step", look: ChartLook = ChartLook(),
) -> Text:
    """`height` lines of `width` cells: y labels, the braille plot, and an x axis line that
    counts the points that could not be plotted."""
    cols, rows = width - Y_LABEL_WIDTH, height - 1
    prepared = [plottable(c, log_y) for c in curves]
    frame = chart_frame(prepared)
    missing = sum(p.missing for p in prepared)
    if frame is None or cols < 4 or rows < 1:
        return Text(_no_plot(missing, log_y) if frame is None else "", style="dim")
    if look.y_range is not None and look.y_range[0] < look.y_range[1]:
        frame = Frame(frame.x, Axis(*look.y_range))
    bits, owner = _cells(prepared, frame, cols, rows, look.dashes)
    styles = list(look.styles) if look.styles else [_style(c) for c in curves]
    cursor = None if look.cursor is None else _column_of(frame, cols, look.cursor)
    out = Text(no_wrap=True, overflow="crop")
    labels = {0: frame.y.high, rows - 1: frame.y.low, rows // 2: frame.y.middle}
    for row in range(rows):
        label = _y_label(labels[row], log_y) if row in labels else " " * (Y_LABEL_WIDTH - 1) + "│"
        out.append(label, style="dim")
        _append_row(out, bits[row], owner[row], styles, cursor)
        out.append("\n")
    out.append(_x_axis(frame, cols, mode, missing), style="dim")
    return out


def _column_of(frame: Frame, cols: int, x: float) -> int | None:
    """The cell column where x is plotted, None outside the plot."""
    xa, xb, xk, xc = dot_scale(frame.x, cols * 2)
    dot = round((x * xa - xb) * xk) + xc
    return dot // 2 if 0 <= dot < cols * 2 else None


def _cells(
    prepared: Sequence[Points], frame: Frame, cols: int, rows: int,
    dashes: Sequence[int] | None = None,
) -> tuple[Any, Any]:
    """Per (row, col) cell: its braille dot bits (0: empty) and the index of the last curve
    with a dot in it, whose colour it takes."""
    import numpy as np

    kept = np.arange(cols) % 4

    bits = np.zeros((rows, cols), dtype=np.int64)
    owner = np.full((rows, cols), -1, dtype=np.int64)
    weights = np.array(_DOTS, dtype=np.int64)  # [x % 2][y % 4]
    for index, points in enumerate(prepared):
        if not len(points.at):
            continue
        dots = _plot(points, frame, cols * 2, rows * 4).reshape(cols, 2, rows, 4)
        if dashes is not None:  # a line style: the curve drawn in some of each 4 cells
            dots &= ((dashes[index] >> kept) & 1).astype(bool)[:, None, None, None]
        mine = np.einsum("cxry,xy->rc", dots.astype(np.int64), weights)
        bits |= mine
        owner[mine > 0] = index
    return bits, owner


def not_plotted(missing: int) -> str:
    return f"{missing} point{'' if missing == 1 else 's'} not plotted"


def _no_plot(missing: int, log_y: bool) -> str:
    if not missing:
        return "no data"
    why = "NaN, infinite or <= 0 on a log scale" if log_y else "NaN or infinite"
    return f"no data to plot: {not_plotted(missing)} ({why})"


_CHARS = (" ", *(chr(0x2800 + bits) for bits in range(1, 256)))  # an empty cell is a space


def _append_row(
    out: Text, bits: Any, owner: Any, styles: list[Style], cursor: int | None = None
) -> None:
    """One chart row as runs of equally styled characters: a span per run, not per cell
    (Textual's cost of drawing a Text grows with its spans); the cursor's cell reversed (a
    rule where the cell is empty)."""
    import numpy as np

    line = "".join([_CHARS[b] for b in bits.tolist()])
    if cursor is not None:
        line = line[:cursor] + (line[cursor].strip() or "│") + line[cursor + 1:]
    at = len(out)
    ends = [*(np.flatnonzero(owner[1:] != owner[:-1]) + 1).tolist(), len(line)]
    start = 0
    for end in ends:
        index = int(owner[start])
        out.append(line[start:end], style=styles[index] if index >= 0 else None)
        start = end
    if cursor is not None:
        out.stylize("reverse", at + cursor, at + cursor + 1)


def _x_axis(frame: Frame, cols: int, mode: XMode, missing: int) -> str:
    """The x range's ends, and between them how many points are not plotted, where it fits."""
    fmt = x_formatter(mode)
    left, right = fmt(frame.x.low), fmt(frame.x.high)
    if len(left) + len(right) + 1 > cols:  # a cut label would read as another number
        left, right = left if len(left) <= cols else "", ""
    gap = max(cols - len(left) - len(right), 1)
    middle = " " * gap
    for note in (f" {not_plotted(missing)} ", f" {missing} skipped ") if missing else ():
        if len(note) <= gap - 2:
            middle = note.center(gap)
            break
    return (" " * Y_LABEL_WIDTH + left + middle + right)[: Y_LABEL_WIDTH + cols]


def _style(curve: Curve) -> Style:
    return Style(color=PALETTE[curve.color % len(PALETTE)], dim=curve.dim)
