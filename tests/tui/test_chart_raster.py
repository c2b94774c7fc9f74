"""The braille rasteriser works over the store's arrays; its first form, a loop over Python
tuples, is kept here as the oracle: the same frame, the same dots, the same cells, for any
points (hypothesis) and for the extremes a hostile writer can put in a logdir."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from distcore.events.snapshots import Column
from distcore.jobs.snapshots import Job
from distmon.render import view_model
from distmon.render.braille import (
    _DOTS,
    Axis,
    Frame,
    _cells,
    _flat,
    _numbers,
    _plot,
    chart_frame,
    dot_scale,
    plottable,
    render_chart,
)
from distmon.render.curve import Curve

MAX = 1.7976931348623157e308
Point = tuple[float, float]


def reference_points(xs: list[float], ys: list[float], log_y: bool) -> list[Point | None]:
    fine = [
        math.isfinite(x) and math.isfinite(y) and (y > 0 or not log_y)
        for x, y in zip(xs, ys, strict=False)  # a curve is as long as its shorter column
    ]
    return [
        (float(x), math.log10(y) if log_y else y) if ok else None
        for x, y, ok in zip(xs, ys, fine, strict=False)
    ]


def reference_dots(
    points: list[Point | None], frame: Frame, w: int, h: int
) -> set[tuple[int, int]]:
    """The loop the chart ran before, point by point and column by column."""
    dots: set[tuple[int, int]] = set()
    prev: tuple[int, int] | None = None
    xa, xb, xk, xc = dot_scale(frame.x, w)
    ya, yb, yk, yc = dot_scale(frame.y, h)
    for xy in points:
        if xy is None:
            prev = None
            continue
        point = (round((xy[0] * xa - xb) * xk) + xc, h - 1 - yc - round((xy[1] * ya - yb) * yk))
        if prev is not None:
            (ax, ay), (bx, by) = prev, point
            span = max(abs(bx - ax), 1)
            for i in range(1, span + 1):
                x = ax + (bx - ax) * i // span
                y0, y1 = ay + (by - ay) * (i - 1) // span, ay + (by - ay) * i // span
                dots.update((x, y) for y in range(min(y0, y1), max(y0, y1) + 1))
        dots.add(point)
        prev = point
    return dots


def signed(value: float) -> tuple[float, float]:
    """A float with its sign, so that 0.0 and -0.0 (a label shows "-0") differ."""
    return value, math.copysign(1.0, value)


def reference_frame(prepared: list[list[Point | None]]) -> tuple[float, ...] | None:
    points = [p for curve in prepared for p in curve if p is not None]
    if not points:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return min(xs), max(xs), min(ys), max(ys)


numbers = st.floats() | st.sampled_from([MAX, -MAX, 1e300, 0.0, -0.0, 5e-324, 2.0**63])
curves = st.lists(st.lists(st.tuples(numbers, numbers), max_size=40), min_size=1, max_size=3)


@settings(max_examples=150, deadline=None)
@given(curves, st.booleans(), st.integers(4, 60), st.integers(1, 12))
@example([[(0.0, 1.0), (1.0, -0.0), (2.0, 0.0)]], False, 10, 3)  # signed zeros tie
@example([[(0.0, 3.0), (1.0, 3.0)]], True, 10, 3)  # flat on a log scale: halfway
def test_frame_dots_and_cells_equal_the_tuple_loop(
    points: list[list[Point]], log_y: bool, cols: int, rows: int
) -> None:
    shown = [Curve(f"c{i}", tuple(p[0] for p in c), tuple(p[1] for p in c), i)
             for i, c in enumerate(points)]  # fmt: skip
    prepared = [plottable(c, log_y) for c in shown]
    reference = [reference_points(list(c.xs), list(c.ys), log_y) for c in shown]
    assert [p.missing for p in prepared] == [r.count(None) for r in reference]
    frame = chart_frame(prepared)
    want = reference_frame(reference)
    if frame is None or want is None:
        assert frame is None and want is None
        return
    x0, x1, y0, y1 = want
    y_axis = Axis(y0, y1) if y0 < y1 else _flat(y0)
    got = (frame.x.low, frame.x.high, frame.y.low, frame.y.high)
    assert [signed(v) for v in got] == [signed(v) for v in (x0, x1, y_axis.low, y_axis.high)]
    cells: dict[tuple[int, int], list[int]] = {}
    for index, (mine, theirs) in enumerate(zip(prepared, reference, strict=True)):
        if not len(mine.at):
            continue
        dots = reference_dots(theirs, frame, cols * 2, rows * 4)
        found = _plot(mine, frame, cols * 2, rows * 4)
        assert {(int(x), int(y)) for x, y in zip(*np.nonzero(found), strict=True)} == dots
        for px, py in dots:
            cell = cells.setdefault((py // 4, px // 2), [0, index])
            cell[0] |= _DOTS[px % 2][py % 4]
            cell[1] = index
    bits, owner = _cells(prepared, frame, cols, rows)
    want_bits = {k: v[0] for k, v in cells.items()}
    assert {(r, c): int(bits[r, c]) for r, c in zip(*np.nonzero(bits), strict=True)} == want_bits
    assert all(owner[r, c] == cells[(r, c)][1] for r, c in want_bits)


def test_a_store_column_is_read_in_place() -> None:
    """The chart reads the snapshot's own arrays: steps stay integers (placed as float(step)
    would place them) and nothing is copied into tuples."""
    from distcore.events.series import SeriesBuffer

    buffer = SeriesBuffer("loss", 1000)
    steps = np.array([-(2**63), 0, 2**63 - 1], dtype=np.int64)
    buffer.extend(steps, np.zeros(3), np.array([1.0, 2.0, 3.0]))
    series = buffer.snapshot()
    assert _numbers(series.steps) is np.asarray(series.steps)  # the store's array itself
    assert _numbers(series.values) is np.asarray(series.values)
    assert plottable(Curve("c", series.steps, series.values, 0), False).x.dtype == np.int64
    text = render_chart([Curve("c", series.steps, series.values, 0)], 40, 6).plain
    same = render_chart([Curve("c", tuple(map(float, series.steps)), (1.0, 2.0, 3.0), 0)], 40, 6)
    assert text == same.plain


def _store_job() -> Job:
    from distcore.events.series import SeriesBuffer
    from tests.tui.fixed import run

    buffer = SeriesBuffer("loss", 1000)
    buffer.extend(np.arange(5, dtype=np.int64) * 10, 100.0 + np.arange(5.0), np.arange(5.0))
    snapshot = run("r", buffer.snapshot())
    return Job(snapshot.name, snapshot.path, {"": snapshot}, "idle", None, (), ())


def test_curves_hand_the_chart_the_snapshot_columns() -> None:
    """Nothing between the store and the chart copies a point: the raw values, steps and wall
    times are the snapshot's own columns, and what is computed (smoothing, relative times) is a
    read-only column over one new array."""
    job = _store_job()
    series = job.parts[""].scalars["loss"]
    (raw,) = view_model.curves([job], "loss", "step", 0.0)
    assert raw.xs is series.steps and raw.ys is series.values
    (wall,) = view_model.curves([job], "loss", "wall", 0.0)
    assert wall.xs is series.wall_times
    (smoothed,) = view_model.curves([job], "loss", "relative", 0.6)
    assert isinstance(smoothed.xs, Column) and isinstance(smoothed.ys, Column)
    assert smoothed.xs == (0.0, 1.0, 2.0, 3.0, 4.0) and smoothed.ys[0] == 0.0
    for column in (smoothed.xs, smoothed.ys):
        assert not np.asarray(column).flags.writeable


def test_curves_compare_as_the_tuples_they_replace() -> None:
    """LineChart skips a redraw of equal curves: equal value by value, as tuples were."""
    job = _store_job()
    (curve,) = view_model.curves([job], "loss", "step", 0.0)
    same = Curve(curve.label, (0.0, 10.0, 20.0, 30.0, 40.0), (0.0, 1.0, 2.0, 3.0, 4.0), 0)
    assert curve == same and hash(curve) == hash(same)
    assert curve != Curve(curve.label, same.xs, (0.0, 1.0, 2.0, 3.0, 5.0), 0)
    assert curve != Curve(curve.label, same.xs, same.ys, 1)
    assert Curve("c", (1.0,), (math.nan,), 0) != Curve("c", (1.0,), (math.nan,), 0)
