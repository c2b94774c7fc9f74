"""Smoothing matches TensorBoard's debiased EMA, checked against its closed form; the array form
the chart uses is checked against the list form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from distcore.smoothing import adjust_weight, debiased_ema, debiased_ema_array, debiased_ema_rows


def closed_form(values: list[float], weight: float) -> list[float]:
    """s_n = sum_i (1-w) w^(n-i) x_i / (1 - w^n): the EMA started at 0, divided by its bias."""
    out = []
    for n in range(1, len(values) + 1):
        acc = sum((1 - weight) * weight ** (n - i) * values[i - 1] for i in range(1, n + 1))
        out.append(acc / (1 - weight**n))
    return out


SERIES = [
    [2.3, 1.9, 1.7, 1.2, 1.1, 0.9, 0.95, 0.7],
    [0.1, 0.5, 0.2, 0.9, 0.4, 0.8],
    [10.0, -3.0, 4.5, 0.0, 7.25],
    [float(i % 7) for i in range(50)],
    [1e-6, 2e-6, 1.5e-6],
]


@pytest.mark.parametrize("weight", [0.0, 0.3, 0.6, 0.9, 0.99])
@pytest.mark.parametrize("values", SERIES)
def test_matches_the_closed_form(values: list[float], weight: float) -> None:
    assert debiased_ema(values, weight) == pytest.approx(closed_form(values, weight), rel=1e-9)


@pytest.mark.parametrize(
    ("values", "weight", "expected"),
    [
        ([4.0, 8.0], 0.5, [4.0, (0.5 * 0.5 * 4 + 0.5 * 8) / 0.75]),  # worked by hand
        ([1.0], 0.6, [1.0]),  # first point is never dragged towards 0
        ([3.0, 3.0, 3.0], 0.6, [3.0, 3.0, 3.0]),  # constant series untouched
        ([], 0.6, []),
    ],
)
def test_hand_worked_rows(values: list[float], weight: float, expected: list[float]) -> None:
    assert debiased_ema(values, weight) == pytest.approx(expected)


def test_non_finite_points_pass_through_and_do_not_poison_the_average() -> None:
    smoothed = debiased_ema([1.0, float("nan"), 3.0, float("inf")], 0.5)
    assert smoothed[0] == 1.0 and math.isnan(smoothed[1]) and math.isinf(smoothed[3])
    assert smoothed[2] == pytest.approx(closed_form([1.0, 3.0], 0.5)[1])


@pytest.mark.parametrize("weight", [-0.1, 1.0, 1.5])
def test_rejects_weights_outside_zero_to_one(weight: float) -> None:
    with pytest.raises(ValueError):
        debiased_ema([1.0, 2.0], weight)


@pytest.mark.parametrize(
    ("weight", "delta", "expected"),
    [(0.6, 0.1, 0.7), (0.6, -0.1, 0.5), (0.0, -0.1, 0.0), (0.95, 0.1, 0.99), (0.1, -0.1, 0.0)],
)
def test_adjust_weight_clamps(weight: float, delta: float, expected: float) -> None:
    assert adjust_weight(weight, delta) == expected


# The chart smooths whole series with the array form, the job index many tails with the rows
# form: both are the list form's function, float for float.
MAX = 1.7976931348623157e308

awkward = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [MAX, -MAX, 1e300, -1e300, 5e-324, 0.0, -0.0, 1.0]
)


def same_floats(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        (x == y and math.copysign(1, x) == math.copysign(1, y)) or (math.isnan(x) and math.isnan(y))
        for x, y in zip(a, b, strict=True)
    )


def assert_same_smoothing(values: list[float], weight: float) -> None:
    got = debiased_ema_array(np.array(values, dtype=np.float64), weight)
    assert got.dtype == np.float64
    assert same_floats(got.tolist(), debiased_ema(values, weight))


@settings(max_examples=300, deadline=None)
@given(st.lists(awkward, max_size=60), st.floats(0.0, 0.99))
@example(values=[MAX, MAX, MAX * 0.999], weight=0.9)  # the list form's overflow, bounded
@example(values=[5e-324, 0.0], weight=0.5)
def test_array_form_equals_the_list_form(
    values: list[float], weight: float
) -> None:
    assert_same_smoothing(values, weight)


@pytest.mark.parametrize("weight", [0.3, 0.6, 0.9, 0.99])
@pytest.mark.parametrize("values", SERIES)
def test_array_form_matches_the_closed_form(values: list[float], weight: float) -> None:
    got = debiased_ema_array(np.array(values), weight).tolist()
    assert got == pytest.approx(closed_form(values, weight), rel=1e-9)


def test_array_form_over_a_long_series() -> None:
    """Long enough that the doubling passes outlast weight**shift underflowing (0.6) and the
    series (0.99)."""
    values = [math.sin(i / 50) + (i % 7) * 0.01 for i in range(5000)]
    for weight in (0.6, 0.99):
        assert_same_smoothing(values, weight)


@pytest.mark.parametrize("values", [[3.0, 3.0, 3.0], [MAX, MAX], [], [7.5]])
def test_array_form_returns_what_needs_no_smoothing_as_is(values: list[float]) -> None:
    array = np.array(values, dtype=np.float64)
    array.flags.writeable = False  # the store's arrays are read-only views: never written
    assert debiased_ema_array(array, 0.6) is array
    assert debiased_ema_array(array, 0.0) is array


def test_array_form_reads_a_store_column_without_writing_it() -> None:
    from distcore.events.series import SeriesBuffer
    from distcore.events.snapshots import Column

    buffer = SeriesBuffer("loss", 100)
    buffer.extend(np.arange(3, dtype=np.int64), np.zeros(3), np.array([4.0, 8.0, math.nan]))
    column = buffer.snapshot().values
    assert isinstance(column, Column)  # the store's own view, not a copy
    smoothed = debiased_ema_array(column, 0.5)
    assert smoothed[:2].tolist() == pytest.approx([4.0, (0.5 * 0.5 * 4 + 0.5 * 8) / 0.75])
    assert math.isnan(smoothed[2]) and column.tolist()[:2] == [4.0, 8.0]


@pytest.mark.parametrize("weight", [-0.1, 1.0])
def test_array_form_rejects_weights_outside_zero_to_one(weight: float) -> None:
    with pytest.raises(ValueError):
        debiased_ema_array(np.array([1.0, 2.0]), weight)


finite = st.floats(-1e300, 1e300)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.lists(st.lists(finite, min_size=n, max_size=n),
                                                    min_size=1, max_size=5)),
       st.floats(0.01, 0.99))
def test_rows_form_equals_the_list_form_row_by_row(rows: list[list[float]], weight: float) -> None:
    """For finite rows that take no bounded path (the rule's own check)."""
    got = debiased_ema_rows(np.array(rows, dtype=np.float64), weight).tolist()
    for row, out in zip(rows, got, strict=True):
        if len(set(row)) > 1 and all(map(math.isfinite, out)):
            assert same_floats(out, debiased_ema(row, weight))


@settings(max_examples=300, deadline=None)
@given(st.lists(awkward, max_size=40), st.lists(awkward, max_size=20),
       st.lists(awkward, max_size=20), st.floats(0.0, 0.99))
def test_a_grown_series_smooths_as_the_whole(
    first: list[float], more: list[float], rest: list[float], weight: float
) -> None:
    """A series smoothed, then again with points appended (twice), from the first's state:
    the whole series' smoothing, float for float; a series that is no extension of the one
    before is smoothed afresh."""
    from distcore.smoothing import debiased_ema_grown

    before = debiased_ema_grown(np.array(first), weight, None)
    grown = debiased_ema_grown(np.array(first + more), weight, before)
    again = debiased_ema_grown(np.array(first + more + rest), weight, grown)
    for values, got in ((first, before), (first + more, grown), (first + more + rest, again)):
        assert same_floats(got.smoothed.tolist(), debiased_ema(values, weight))
    other = debiased_ema_grown(np.array(rest + first), weight, again)
    assert same_floats(other.smoothed.tolist(), debiased_ema(rest + first, weight))


def test_a_series_with_nothing_new_keeps_its_smoothing() -> None:
    """The same arrays as before (a chart drawn from them is not drawn again)."""
    from distcore.smoothing import debiased_ema_grown

    before = debiased_ema_grown(np.array([1.0, 2.0, 4.0]), 0.6, None)
    assert debiased_ema_grown(np.array([1.0, 2.0, 4.0]), 0.6, before) is before
