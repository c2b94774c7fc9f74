"""A worker's step timings over its last WINDOW_SECONDS of log intervals, for its heartbeat.

distmon compares the workers' heartbeats to name a straggler, and each heartbeat is read when
it is read: one log interval (often a fraction of a second) is too short to compare. On a
loaded machine one worker's interval that the scheduler preempted reads 1.3-1.4x another's
while neither is slower, and the two workers' newest intervals need not even be the same steps.
Over the last ~10 s both workers' windows hold mostly the same steps and a preempted interval
is one of many, while a worker slowed for good still crosses the 1.2x ratio in well under its
window's length. The window is counted back from the newest interval, not from now: a job
that stopped stepping keeps its last figures.

Pure: the caller passes each interval's end on its own monotonic clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

WINDOW_SECONDS = 10.0
MAX_INTERVALS = 4096
"""Bounds the memory of a job that logs every step of a few milliseconds."""


@dataclass(frozen=True)
class IntervalTiming:
    """One log interval: its timed steps and their per-step means, in seconds."""

    end: float
    steps: int
    step_seconds: float
    compute_seconds: float
    reduce_wait_seconds: float


@dataclass(frozen=True)
class WindowMeans:
    steps: int
    step_seconds: float
    compute_seconds: float
    reduce_wait_seconds: float


def window_means(intervals: list[IntervalTiming]) -> WindowMeans | None:
    """The per-step means over `intervals` together, each weighted by its steps."""
    steps = sum(i.steps for i in intervals)
    if steps <= 0:
        return None

    def mean(values: list[float]) -> float:
        return sum(v * i.steps for v, i in zip(values, intervals, strict=True)) / steps

    return WindowMeans(steps, mean([i.step_seconds for i in intervals]),
                       mean([i.compute_seconds for i in intervals]),
                       mean([i.reduce_wait_seconds for i in intervals]))


class PerfWindow:
    """The intervals that ended within `seconds` of the newest (the newest always kept)."""

    def __init__(self, seconds: float = WINDOW_SECONDS) -> None:
        self.seconds = seconds
        self._intervals: deque[IntervalTiming] = deque(maxlen=MAX_INTERVALS)

    def add(self, interval: IntervalTiming) -> WindowMeans | None:
        """Add an interval (ignored without steps); the window's means after it."""
        if interval.steps > 0:
            self._intervals.append(interval)
        newest = self._intervals[-1].end if self._intervals else 0.0
        while self._intervals and self._intervals[0].end < newest - self.seconds:
            self._intervals.popleft()
        return window_means(list(self._intervals))
