"""A worker's step timings over its last window of log intervals (distagent.train.perf_window)."""

from __future__ import annotations

import pytest

from distagent.train.perf_window import IntervalTiming, PerfWindow, WindowMeans, window_means


def timing(end: float, steps: int, compute: float, wait: float = 0.01) -> IntervalTiming:
    return IntervalTiming(end, steps, compute + wait, compute, wait)


@pytest.mark.parametrize(("intervals", "expect"), [
    ([], None),
    ([timing(1.0, 0, 0.1)], None),
    ([timing(1.0, 10, 0.1)], WindowMeans(10, 0.11, 0.1, 0.01)),
    # Weighted by steps: 30 steps at 0.2 s and 10 at 0.1 s.
    ([timing(1.0, 10, 0.1), timing(2.0, 30, 0.2)], WindowMeans(40, 0.185, 0.175, 0.01)),
])
def test_window_means(intervals: list[IntervalTiming], expect: WindowMeans | None) -> None:
    got = window_means(intervals)
    if expect is None:
        assert got is None
    else:
        assert got is not None and got.steps == expect.steps
        for name in ("step_seconds", "compute_seconds", "reduce_wait_seconds"):
            assert getattr(got, name) == pytest.approx(getattr(expect, name)), name


@pytest.mark.parametrize(("ends_and_computes", "expect_compute"), [
    # A preempted interval among healthy ones moves the mean by a little, not 1.4x.
    ([(t, 0.10) for t in range(9)] + [(9, 0.14)], 0.104),
    # Counted back from the newest interval: those older than 10 s before it are dropped.
    ([(0, 1.0), (5, 0.1), (11, 0.1)], 0.1),
    # A job that stopped stepping keeps its last window (no interval is too old for "now").
    ([(100, 0.3)], 0.3),
])
def test_window_keeps_the_last_seconds(ends_and_computes: list[tuple[float, float]],
                                       expect_compute: float) -> None:
    window = PerfWindow(seconds=10.0)
    means = None
    for end, compute in ends_and_computes:
        means = window.add(timing(end, 5, compute))
    assert means is not None and means.compute_seconds == pytest.approx(expect_compute)


def test_an_interval_without_steps_changes_nothing() -> None:
    window = PerfWindow(seconds=10.0)
    window.add(timing(0.0, 4, 0.2))
    assert window.add(timing(1.0, 0, 9.0)) == window_means([timing(0.0, 4, 0.2)])
