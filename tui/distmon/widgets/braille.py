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

from distmon.widgets.model import Curve, XMode

PALETTE = ("cyan", "magenta", "yellow", "green", "bright_blue", "red", "bright_white")
# Dot bit for (x % 2, y % 4) inside one braille cell (U+2800 + bits).
_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
Y_LABEL_WIDTH = 8


@dataclass(frozen=True)
class Frame:
    x0: float
    x1: float
    y0: float
    y1: float


def _ty(value: float, log_y: bool) -> float | None:
    if not math.isfinite(value) or (log_y and value <= 0):
        return None
    return math.log10(value) if log_y else value


def frame_of(curves: Sequence[Curve], log_y: bool) -> Frame | None:
    xs = [x for c in curves for x in c.xs]
    ys = [t for c in curves for y in c.ys if (t := _ty(y, log_y)) is not None]
    if not xs or not ys:
        return None
    y0, y1 = min(ys), max(ys)
    if y0 == y1:  # a flat line sits in the middle
        y0, y1 = y0 - 0.5 * (abs(y0) or 1), y1 + 0.5 * (abs(y1) or 1)
    x0, x1 = min(xs), max(xs)
    return Frame(x0, x1 if x1 > x0 else x0 + 1, y0, y1)


def _plot(curve: Curve, frame: Frame, w: int, h: int, log_y: bool) -> set[tuple[int, int]]:
    """The dots (px, py) that draw `curve`, joined column by column."""
    dots: set[tuple[int, int]] = set()
    sx = (w - 1) / (frame.x1 - frame.x0)
    sy = (h - 1) / (frame.y1 - frame.y0)
    prev: tuple[int, int] | None = None
    for x, y in zip(curve.xs, curve.ys, strict=False):
        ty = _ty(y, log_y)
        if ty is None:
            prev = None  # a gap, as TensorBoard leaves one
            continue
        point = (round((x - frame.x0) * sx), h - 1 - round((ty - frame.y0) * sy))
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
        return lambda v: f"{v:.0f}"
    if mode == "relative":
        return _duration
    return lambda v: time.strftime("%H:%M:%S", time.localtime(v))


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _y_label(value: float, log_y: bool) -> str:
    shown = 10**value if log_y else value
    text = f"{shown:.3g}" if abs(shown) < 1e5 else f"{shown:.1e}"
    return text.rjust(Y_LABEL_WIDTH - 1)[: Y_LABEL_WIDTH - 1] + "┤"


def render_chart(
    curves: Sequence[Curve], width: int, height: int, *, log_y: bool = False, mode: XMode = "step"
) -> Text:
    """`height` lines of `width` cells: y labels, the braille plot, and an x axis line."""
    cols, rows = width - Y_LABEL_WIDTH, height - 1
    frame = frame_of(curves, log_y)
    if frame is None or cols < 4 or rows < 1:
        return Text("no data" if frame is None else "", style="dim")
    cells: dict[tuple[int, int], list[int]] = {}  # (row, col) -> [bits, curve index]
    for index, curve in enumerate(curves):
        for px, py in _plot(curve, frame, cols * 2, rows * 4, log_y):
            cell = cells.setdefault((py // 4, px // 2), [0, index])
            cell[0] |= _DOTS[px % 2][py % 4]
            cell[1] = index
    styles = [_style(c) for c in curves]
    out = Text(no_wrap=True, overflow="crop")
    labels = {0: frame.y1, rows - 1: frame.y0, rows // 2: (frame.y0 + frame.y1) / 2}
    for row in range(rows):
        label = _y_label(labels[row], log_y) if row in labels else " " * (Y_LABEL_WIDTH - 1) + "│"
        out.append(label, style="dim")
        _append_row(out, [cells.get((row, col)) for col in range(cols)], styles)
        out.append("\n")
    out.append(_x_axis(frame, cols, mode), style="dim")
    return out


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


def _x_axis(frame: Frame, cols: int, mode: XMode) -> str:
    fmt = x_formatter(mode)
    left, right = fmt(frame.x0), fmt(frame.x1)
    gap = max(cols - len(left) - len(right), 1)
    return " " * Y_LABEL_WIDTH + left + " " * gap + right


def _style(curve: Curve) -> Style:
    return Style(color=PALETTE[curve.color % len(PALETTE)], dim=curve.dim)
