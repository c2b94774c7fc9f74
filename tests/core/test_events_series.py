"""Series: the restart rule, bounded decimation, and exact last/min/max/count."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcore.decimate import keep_indices
from distcore.events.series import SeriesBuffer, survivors


def _extend(series: SeriesBuffer, steps: list[int], values: list[float] | None = None) -> None:
    vals = values if values is not None else [float(s) for s in steps]
    series.extend(
        np.asarray(steps, dtype=np.int64),
        np.arange(len(steps), dtype=np.float64),
        np.asarray(vals, dtype=np.float64),
    )


@pytest.mark.parametrize(
    ("batches", "kept", "count"),
    [
        ([[0, 1, 2]], [0, 1, 2], 3),
        ([[0, 1, 2], [3, 4]], [0, 1, 2, 3, 4], 5),
        ([[0, 1, 2, 3], [2, 3]], [0, 1, 2, 3], 4),  # restart at 2: old 2, 3 replaced
        ([[0, 1, 2, 3, 1, 2]], [0, 1, 2], 3),  # restart inside one batch
        ([[5, 6], [0]], [0], 1),  # restart below everything
        ([[0, 1], [1], [1]], [0, 1], 2),  # the same step again replaces it
        ([[3, 1, 2, 0, 4]], [0, 4], 2),
    ],
)
def test_a_point_at_step_s_drops_kept_points_at_steps_from_s(
    batches: list[list[int]], kept: list[int], count: int
) -> None:
    series = SeriesBuffer("loss", max_points=100)
    for batch in batches:
        _extend(series, batch)
    snap = series.snapshot()
    assert list(snap.steps) == kept
    assert snap.count == count
    assert snap.last_step == kept[-1]


@pytest.mark.parametrize(
    ("steps", "keep"),
    [
        ([1, 2, 3], [True, True, True]),
        ([3, 2, 1], [False, False, True]),
        ([1, 3, 2], [True, False, True]),
    ],
)
def test_survivors_of_one_batch(steps: list[int], keep: list[bool]) -> None:
    assert survivors(np.asarray(steps, dtype=np.int64)).tolist() == keep


def test_restart_recomputes_min_and_max() -> None:
    series = SeriesBuffer("loss", max_points=100)
    _extend(series, [0, 1, 2, 3], [5.0, 1.0, 9.0, -4.0])
    _extend(series, [2], [3.0])
    snap = series.snapshot()
    assert (snap.min, snap.max, snap.count, snap.last_value) == (1.0, 5.0, 3, 3.0)


def test_whole_run_purge() -> None:
    series = SeriesBuffer("loss", max_points=100)
    _extend(series, list(range(10)))
    series.purge_from(4)
    assert series.snapshot().steps == (0, 1, 2, 3)
    assert series.snapshot().count == 4


def test_millions_of_points_stay_bounded_and_exact() -> None:
    rng = np.random.default_rng(0)
    series = SeriesBuffer("loss", max_points=500)
    all_values = []
    for start in range(0, 1_000_000, 50_000):
        values = rng.normal(size=50_000)
        all_values.append(values)
        series.extend(np.arange(start, start + 50_000), np.zeros(50_000), values)
        assert len(series) <= 500
    values = np.concatenate(all_values)
    snap = series.snapshot()
    assert snap.count == 1_000_000
    assert snap.min == values.min() and snap.max == values.max()
    assert snap.last_value == values[-1] and snap.last_step == 999_999
    assert snap.steps[0] == 0
    # The extremes are among the kept points, so a chart shows them.
    assert values.min() in snap.values and values.max() in snap.values
    assert list(snap.steps) == sorted(set(snap.steps))


def test_count_after_a_restart_inside_a_decimated_series_is_close() -> None:
    series = SeriesBuffer("loss", max_points=100)
    _extend(series, list(range(10_000)))
    _extend(series, [5000])
    assert abs(series.snapshot().count - 5001) <= 60  # estimated within one kept stretch
    assert series.snapshot().max == 5000.0


def test_nan_and_inf_values() -> None:
    series = SeriesBuffer("loss", max_points=100)
    _extend(series, [0, 1, 2, 3], [1.0, math.inf, math.nan, -2.0])
    snap = series.snapshot()
    assert snap.min == -2.0 and snap.max == math.inf and snap.count == 4
    assert math.isnan(snap.values[2])


@pytest.mark.parametrize("target", [2, 3, 10, 101])
def test_decimation_keeps_first_last_min_max(target: int) -> None:
    steps = np.arange(0, 3000, 3, dtype=np.int64)
    values = np.sin(steps / 50.0)
    values[321] = -7.0
    values[777] = 8.0
    keep = keep_indices(steps, values, target)
    assert len(keep) <= max(target, 4)
    assert keep[0] == 0 and keep[-1] == len(steps) - 1
    assert 321 in keep and 777 in keep
    assert np.all(np.diff(keep) > 0)


def _reference_keep(steps: np.ndarray, values: np.ndarray, target: int) -> np.ndarray:
    """The rule written plainly: sort each bucket by value (NaN highest, ties by index)."""
    n = len(steps)
    if n <= target:
        return np.arange(n)
    buckets = max(1, (target - 2) // 2)
    span = float(max(1, int(steps[-1]) - int(steps[0]) + 1))
    offset = steps[1:-1].astype(np.float64) - float(steps[0])
    bucket = np.clip(offset * buckets / span, 0, buckets - 1).astype(np.int64)
    kept = {0, n - 1}
    for b in np.unique(bucket):
        members = np.flatnonzero(bucket == b)
        order = members[np.lexsort((values[1:-1][members],))]
        kept |= {int(order[0]) + 1, int(order[-1]) + 1}
    return np.array(sorted(kept))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=3, max_size=300),
    st.integers(-(2**62), 2**62),
    st.data(),
    st.integers(2, 60),
)
def test_decimation_matches_the_plain_rule(
    gaps: list[int], first: int, data: st.DataObject, target: int
) -> None:
    steps = first + np.cumsum(np.array(gaps, dtype=np.int64))
    pool = st.sampled_from([0.0, -0.0, 1.0, 2.0, math.nan, math.inf, -math.inf]) | st.floats()
    values = np.array(data.draw(st.lists(pool, min_size=len(gaps), max_size=len(gaps))))
    assert keep_indices(steps, values, target).tolist() == _reference_keep(
        steps, values, target
    ).tolist()


_FIRST_VALUES = st.lists(
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 1.0, -2.5])
    | st.floats(allow_nan=True),
    min_size=1, max_size=30,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(values=_FIRST_VALUES, shuffle=st.booleans(), data=st.data())
def test_a_first_read_is_the_same_in_c_and_numpy(
    values: list[float], shuffle: bool, data: st.DataObject
) -> None:
    """A fresh series takes the batch's arrays as they are, with the kernel's increasing check
    and min/max: the same state as numpy's, bit for bit (signed zeros and NaN included)."""
    import struct

    import distcore.tfrecord.kernel as kernel
    from tests.core.conftest import compiled_kernel

    steps = list(range(len(values)))
    if shuffle:
        steps = data.draw(st.permutations(steps))
    states = []
    for compiled in (compiled_kernel(), None):
        saved, kernel.ACTIVE = kernel.ACTIVE, compiled
        try:
            series = SeriesBuffer("t", max_points=20)
            _extend(series, steps, values)
        finally:
            kernel.ACTIVE = saved
        states.append((
            series.steps.tolist(), series.values.view(np.int64).tolist(),
            series.weights.tolist(), series.count, struct.pack("<dd", series.min, series.max),
        ))  # fmt: skip
    assert states[0] == states[1]
