"""Charts and smoothing over the numbers a hostile or broken writer can put in a logdir: NaN,
infinities and 1e300 as values and wall times, steps at +-2^63, one point, all at one step,
negative steps. Nothing raises in any mode; what cannot be plotted is skipped and counted."""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from distcore.jobs.snapshots import Job
from distcore.smoothing import debiased_ema
from distmon.render.braille import (
    Axis,
    chart_frame,
    dot_scale,
    plottable,
    render_chart,
    x_formatter,
)
from distmon.render.hosts import sparkline
from distmon.render.view_model import X_MODES, Curve, XMode, curves
from tests.tui.fixed import run, series

NAN, INF = math.nan, math.inf
BIG = 2.0**63
MAX = 1.7976931348623157e308

# (xs, ys, points that cannot be plotted on a linear / on a log scale)
CASES: dict[str, tuple[list[float], list[float], int, int]] = {
    "one point": ([5.0], [1.0], 0, 0),
    "all at one step": ([7.0] * 4, [1.0, 2.0, 3.0, 4.0], 0, 0),
    "flat line": ([0.0, 1.0, 2.0], [3.0] * 3, 0, 0),
    "negative steps": ([-30.0, -20.0, -10.0], [1.0, 0.5, 0.2], 0, 0),
    "steps at +-2^63": ([-BIG, 0.0, BIG - 1024], [1.0, 2.0, 3.0], 0, 0),
    "x over the whole float range": ([-MAX, MAX], [1.0, 2.0], 0, 0),
    "y over the whole float range": ([0.0, 1.0], [-MAX, MAX], 0, 1),
    "flat at the largest float": ([0.0, 1.0], [MAX, MAX], 0, 0),
    "flat at the smallest subnormal": ([0.0, 1.0], [5e-324, 5e-324], 0, 0),
    "1e300 x at one value": ([1e300, 1e300], [1.0, 2.0], 0, 0),
    "1e300 values": ([0.0, 1.0, 2.0], [1e300, -1e300, 1.0], 0, 1),
    "NaN values": ([0.0, 1.0, 2.0], [NAN, 1.0, NAN], 2, 2),
    "infinite values": ([0.0, 1.0, 2.0], [INF, 1.0, -INF], 2, 2),
    "NaN and infinite x": ([NAN, INF, -INF, 3.0], [1.0, 2.0, 3.0, 4.0], 3, 3),
    "nothing plottable": ([NAN, 1.0], [1.0, NAN], 2, 2),
    "zero and negative on a log scale": ([0.0, 1.0, 2.0], [0.0, -1.0, 10.0], 0, 2),
    "empty": ([], [], 0, 0),
}


@pytest.mark.parametrize("mode", X_MODES)
@pytest.mark.parametrize("log_y", [False, True])
@pytest.mark.parametrize("size", [(80, 12), (12, 3), (9, 2)])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_chart_never_raises_and_counts_what_it_skips(
    case: str, size: tuple[int, int], log_y: bool, mode: XMode
) -> None:
    xs, ys, skipped_linear, skipped_log = CASES[case]
    curve = Curve(case, tuple(xs), tuple(ys), 0)
    text = render_chart([curve], *size, log_y=log_y, mode=mode).plain
    missing = skipped_log if log_y else skipped_linear
    if not text.startswith("no data"):  # a message, wrapped by the widget; the chart must fit
        assert all(len(line) <= size[0] for line in text.split("\n")), text
    assert text.isprintable() or "\n" in text
    if size == (80, 12) and len(xs):
        note = f"{missing} point{'s' if missing != 1 else ''} not plotted"
        assert (note in text) == bool(missing), text


@pytest.mark.parametrize("log_y", [False, True])
def test_overlay_of_every_case_counts_all_skipped_points(log_y: bool) -> None:
    many = [
        Curve(name, tuple(xs), tuple(ys), i)
        for i, (name, (xs, ys, _, _)) in enumerate(CASES.items())
    ]
    missing = sum(log if log_y else linear for _, _, linear, log in CASES.values())
    text = render_chart(many, 100, 20, log_y=log_y).plain
    assert f"{missing} points not plotted" in text.split("\n")[-1]


@pytest.mark.parametrize(
    ("xs", "ys", "frame"),
    [
        ([0.0, 10.0], [1.0, 3.0], ((0.0, 10.0), (1.0, 3.0))),
        ([NAN, 4.0, INF], [1.0, 2.0, 5.0], ((4.0, 4.0), (1.0, 3.0))),  # one point left: padded
        ([0.0], [MAX], ((0.0, 0.0), (MAX, MAX))),  # padding would overflow: kept flat
        ([-MAX, MAX], [0.0, 1.0], ((-MAX, MAX), (0.0, 1.0))),
    ],
)
def test_frame_covers_the_plottable_points(
    xs: list[float], ys: list[float], frame: tuple[tuple[float, float], tuple[float, float]]
) -> None:
    found = chart_frame([plottable(Curve("c", tuple(xs), tuple(ys), 0), False)])
    assert found is not None
    assert ((found.x.low, found.x.high), (found.y.low, found.y.high)) == frame


@pytest.mark.parametrize(
    ("low", "high", "value", "dot"),
    [
        (0.0, 10.0, 5.0, 50),
        (0.0, 10.0, 10.0, 100),
        (-MAX, MAX, 0.0, 50),  # the span overflows: computed from halves
        (-MAX, MAX, MAX, 100),
        (-MAX, MAX, -MAX, 0),
        (1e300, 1e300, 1e300, 50),  # a single value sits in the middle
        (0.0, 5e-324, 5e-324, 50),  # a span too small to divide by: the middle
        (-BIG, BIG, BIG, 100),
    ],
)
def test_dot_scale_never_overflows(low: float, high: float, value: float, dot: int) -> None:
    a, b, k, c = dot_scale(Axis(low, high), 101)
    assert round((value * a - b) * k) + c == dot


@pytest.mark.parametrize("mode", X_MODES)
@pytest.mark.parametrize("value", [0.0, -1.0, 1e300, -1e300, MAX, BIG, NAN, INF, -INF])
def test_x_labels_format_any_number(mode: XMode, value: float) -> None:
    label = x_formatter(mode)(value)
    assert label and label.isprintable() and len(label) <= 20


@pytest.mark.parametrize(
    "values",
    [
        [MAX, MAX, -MAX],
        [1e300, NAN, -1e300, INF],
        [NAN] * 5,
        [INF, -INF],
        [5e-324, 0.0, -5e-324],
        [1.0],
        [],
    ],
)
@pytest.mark.parametrize("weight", [0.0, 0.6, 0.99])
def test_smoothing_passes_non_finite_values_through(values: list[float], weight: float) -> None:
    smoothed = debiased_ema(values, weight)
    assert len(smoothed) == len(values)
    for raw, out in zip(values, smoothed, strict=True):
        if not math.isfinite(raw):
            assert out is raw or (math.isnan(raw) and math.isnan(out))


def lone_job(snapshot: Any) -> Job:
    """A job of one run, as the index makes it for a run that is not a Keras part."""
    return Job(snapshot.name, snapshot.path, {"": snapshot}, "idle", None, (), ())


def test_view_model_to_chart_on_a_series_of_extremes() -> None:
    """The dashboard's own path: series -> curves (every mode, smoothing) -> chart."""
    hostile = series("loss", [1e300, NAN, -INF, 1.0, 5e-324])
    hostile = hostile.__class__(
        **{
            **hostile.__dict__,
            "wall_times": (NAN, 1e300, -1e300, INF, 0.0),
            "steps": (-(2**63), -1, 0, 2**63 - 1, 5),
        }
    )
    jobs = [lone_job(run("hostile", hostile))]
    for mode in X_MODES:
        for smoothing in (0.0, 0.6):
            shown = curves(jobs, "loss", mode, smoothing)
            for log_y in (False, True):
                render_chart(shown, 60, 10, log_y=log_y, mode=mode)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(), st.floats()),
        max_size=30,
    ),
    st.booleans(),
    st.sampled_from(X_MODES),
    st.integers(1, 100),
    st.integers(1, 30),
)
def test_any_points_any_size(
    points: list[tuple[float, float]], log_y: bool, mode: XMode, width: int, height: int
) -> None:
    curve = Curve("c", tuple(p[0] for p in points), tuple(p[1] for p in points), 0)
    text = render_chart([curve], width, height, log_y=log_y, mode=mode).plain
    if not text.startswith("no data"):
        assert all(len(line) <= width for line in text.split("\n")), text


def test_relative_time_starts_at_the_first_finite_wall_time() -> None:
    hostile = series("loss", [3.0, 2.0, 1.0])
    hostile = hostile.__class__(**{**hostile.__dict__, "wall_times": (NAN, 100.0, 160.0)})
    (curve,) = curves([lone_job(run("r", hostile))], "loss", "relative", 0.0)
    assert curve.xs[1:] == (0.0, 60.0) and math.isnan(curve.xs[0])
    assert "1 point not plotted" in render_chart([curve], 80, 10, mode="relative").plain


@pytest.mark.parametrize("values", [[NAN, INF, -INF, 50.0, None, 1e300, -1e300]])
def test_sparkline_skips_non_finite_samples(values: list[float | None]) -> None:
    assert sparkline(values, len(values)).plain[:3] == "   "


@pytest.mark.parametrize(
    ("values", "weight"),
    [
        ([MAX, MAX, MAX * 0.999], 0.9),  # found by hand: rounding smoothed this to inf
        ([-MAX, -MAX, -MAX * 0.99], 0.9),
        ([MAX, -MAX, MAX, MAX], 0.6),
    ],
)
def test_smoothing_a_finite_series_stays_finite(values: list[float], weight: float) -> None:
    assert all(math.isfinite(v) for v in debiased_ema(values, weight))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=40),
    st.floats(0.0, 0.99),
)
@example(values=[5e-324, 0.0], weight=0.5)  # found by hypothesis: a subnormal halves to zero
def test_smoothed_values_stay_within_the_values_so_far(values: list[float], weight: float) -> None:
    """A weighted mean of the values so far: finite, and within their range (give or take the
    rounding TensorBoard's own arithmetic has)."""
    for i, out in enumerate(debiased_ema(values, weight)):
        low, high = min(values[: i + 1]), max(values[: i + 1])
        # Relative rounding, and subnormals, which halve to zero: no arithmetic keeps those.
        slack = max(1e-12 * max(abs(low), abs(high)), sys.float_info.min)
        assert math.isfinite(out) and low - slack <= out <= high + slack
