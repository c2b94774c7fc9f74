"""A braille line chart, as a pure function from curves to Rich text.

Why not textual-plotext: plotext rebuilt a 2-curve, 2,000-point chart in about 60 ms here, so
two charts at 1 Hz would cost 12% of a core by themselves (the target is 5% for all of distmon).
This renderer maps each point to a 2x4-dot braille cell once, O(points + width), about 1-2 ms.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

from distmon.widgets.view_model import Curve, XMode

PALETTE = ("cyan", "magenta", "yellow", "green", "bright_blue", "red", "bright_white")
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


def plottable(curve: Curve, log_y: bool) -> list[tuple[float, float] | None]:
    """The curve's points as plot coordinates; None for a point that cannot be plotted (a
    non-finite x or y, a y <= 0 on a log scale), which leaves a gap as TensorBoard does."""
    isfinite, log10 = math.isfinite, math.log10  # a hot loop: 2,000 points per curve
    if log_y:
        return [
            (x, log10(y)) if isfinite(x) and isfinite(y) and y > 0 else None
            for x, y in zip(curve.xs, curve.ys, strict=False)
        ]
    return [
        (x, y) if isfinite(x) and isfinite(y) else None
        for x, y in zip(curve.xs, curve.ys, strict=False)
    ]


def _flat(value: float) -> Axis:
    """A range around a single value: a flat line sits in the middle, labelled above and below."""
    pad = 0.5 * (abs(value) or 1.0)
    low, high = value - pad, value + pad
    return Axis(low, high) if math.isfinite(low) and math.isfinite(high) else Axis(value, value)


def chart_frame(prepared: Sequence[Sequence[tuple[float, float] | None]]) -> Frame | None:
    """The axes around every plottable point (`plottable`'s output per curve); None: none."""
    points = [p for curve in prepared for p in curve if p is not None]
    if not points:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    y0, y1 = min(ys), max(ys)
    return Frame(Axis(min(xs), max(xs)), Axis(y0, y1) if y0 < y1 else _flat(y0))


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


def _plot(
    points: Sequence[tuple[float, float] | None], frame: Frame, w: int, h: int
) -> set[tuple[int, int]]:
    """The dots (px, py) that draw one curve's `points`, joined column by column."""
    dots: set[tuple[int, int]] = set()
    prev: tuple[int, int] | None = None
    xa, xb, xk, xc = dot_scale(frame.x, w)
    ya, yb, yk, yc = dot_scale(frame.y, h)
    bottom = h - 1 - yc
    for xy in points:  # inlined: this loop runs for every point at every redraw
        if xy is None:
            prev = None  # a gap, as TensorBoard leaves one
            continue
        point = (round((xy[0] * xa - xb) * xk) + xc, bottom - round((xy[1] * ya - yb) * yk))
        if prev is not None:
            _join(prev, point, dots)
        dots.add(point)
        prev = point
    return dots


def _join(a: tuple[int, int], b: tuple[int, int], dots: set[tuple[int, int]]) -> None:
    (ax, ay), (bx, by) = a, b
    span = max(abs(bx - ax), 1)
    for i in range(1, span + 1):
        x = ax + (bx - ax) * i // span
        y_from = ay + (by - ay) * (i - 1) // span
        y_to = ay + (by - ay) * i // span
        for y in range(min(y_from, y_to), max(y_from, y_to) + 1):
            dots.add((x, y))


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
    text = f"{shown:.3g}" if abs(shown) < 1e5 else f"{shown:.1e}"
    return text.rjust(Y_LABEL_WIDTH - 1)[: Y_LABEL_WIDTH - 1] + "┤"


def _pow10(exponent: float) -> float:
    try:
        return math.pow(10.0, exponent)
    except OverflowError:
        return math.inf


def render_chart(
    curves: Sequence[Curve], width: int, height: int, *, log_y: bool = False, mode: XMode = "step"
) -> Text:
    """`height` lines of `width` cells: y labels, the braille plot, and an x axis line that
    counts the points that could not be plotted."""
    cols, rows = width - Y_LABEL_WIDTH, height - 1
    prepared = [plottable(c, log_y) for c in curves]
    frame = chart_frame(prepared)
    missing = sum(p is None for points in prepared for p in points)
    if frame is None or cols < 4 or rows < 1:
        return Text(_no_plot(missing, log_y) if frame is None else "", style="dim")
    cells: dict[tuple[int, int], list[int]] = {}  # (row, col) -> [bits, curve index]
    for index, points in enumerate(prepared):
        for px, py in _plot(points, frame, cols * 2, rows * 4):
            cell = cells.setdefault((py // 4, px // 2), [0, index])
            cell[0] |= _DOTS[px % 2][py % 4]
            cell[1] = index
    styles = [_style(c) for c in curves]
    out = Text(no_wrap=True, overflow="crop")
    labels = {0: frame.y.high, rows - 1: frame.y.low, rows // 2: frame.y.middle}
    for row in range(rows):
        label = _y_label(labels[row], log_y) if row in labels else " " * (Y_LABEL_WIDTH - 1) + "│"
        out.append(label, style="dim")
        _append_row(out, [cells.get((row, col)) for col in range(cols)], styles)
        out.append("\n")
    out.append(_x_axis(frame, cols, mode, missing), style="dim")
    return out


def not_plotted(missing: int) -> str:
    return f"{missing} point{'' if missing == 1 else 's'} not plotted"


def _no_plot(missing: int, log_y: bool) -> str:
    if not missing:
        return "no data"
    why = "NaN, infinite or <= 0 on a log scale" if log_y else "NaN or infinite"
    return f"no data to plot: {not_plotted(missing)} ({why})"


def _append_row(out: Text, row: list[list[int] | None], styles: list[Style]) -> None:
    """One chart row as runs of equally styled characters: a span per run, not per cell
    (Textual's cost of drawing a Text grows with its spans)."""
    run: list[str] = []
    run_style: Style | None = None
    for cell in row:
        char, style = (" ", None) if cell is None else (chr(0x2800 + cell[0]), styles[cell[1]])
        if style is not run_style and run:
            out.append("".join(run), style=run_style)
            run = []
        run.append(char)
        run_style = style
    if run:
        out.append("".join(run), style=run_style)


def _x_axis(frame: Frame, cols: int, mode: XMode, missing: int) -> str:
    """The x range's ends, and between them how many points are not plotted, where it fits."""
    fmt = x_formatter(mode)
    left, right = fmt(frame.x.low), fmt(frame.x.high)
    gap = max(cols - len(left) - len(right), 1)
    middle = " " * gap
    for note in (f" {not_plotted(missing)} ", f" {missing} skipped ") if missing else ():
        if len(note) <= gap - 2:
            middle = note.center(gap)
            break
    return (" " * Y_LABEL_WIDTH + left + middle + right)[: Y_LABEL_WIDTH + cols]


def _style(curve: Curve) -> Style:
    return Style(color=PALETTE[curve.color % len(PALETTE)], dim=curve.dim)
