"""Where a series spiked: the newest point far above the median of the points before it.

A robust rule: the reference is the median of the `window` points before each point, and the
spread its median absolute deviation (MAD, scaled by 1.4826 to read as a standard deviation for
normal noise), so a few earlier spikes, or NaNs, move neither. A point spikes when it is above
that median by more than `z` deviations *and* by `factor - 1` times the median's size (for a
positive loss: `factor` times the median): the first keeps a noisy series' usual swings out,
the second a flat one's tiny ones.

The search is exact and cheap: every point of the tail would need its own median (64 sorts of
20 points per run, most of a sweep's refresh), so blocks of points are first bounded below. A
window's median is at least the k-th smallest of any set of points that holds the window (k:
half the window), so the k-th smallest of a block's windows together bounds all of their
medians, and only the points above `factor` times that bound (that bound itself when it is
negative) can spike; only they get their own median. tests/core/oracle_rules.py holds the plain
form (every point's median) that the tests compare this with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

MAD_SCALE: Final = 1.4826  # MAD to a standard deviation, for normal noise
TINY: Final = 1e-12  # a rise this small is no spike, whatever the spread (a constant series)


@dataclass(frozen=True)
class Spike:
    at: int  # index into the values searched
    median: float  # of the window before it
    deviation: float  # its MAD × MAD_SCALE

    def above(self, value: float, z: float, factor: float) -> bool:
        """`value` stands out of this window by the rule's two margins."""
        margin = max(z * self.deviation, (factor - 1.0) * abs(self.median), TINY)
        return not math.isfinite(value) or value - self.median > margin


def median(values: Sequence[float]) -> float:
    """statistics.median's value (the same formula: the middle, or the mean of the two), with
    less of its overhead: it runs for every point that may spike."""
    ordered = sorted(values)
    half = len(ordered) // 2
    return ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2


def window_spike(
    values: Sequence[float], i: int, window: int, min_points: int, z: float, factor: float
) -> Spike | None:
    """values[i] as a spike over the finite points of the `window` before it (at least
    `min_points` of them), or None."""
    value = values[i]
    if not math.isfinite(value):
        return None  # a NaN or an infinity is the divergence rule's, not a spike
    before = [v for v in values[max(0, i - window) : i] if math.isfinite(v)]
    if len(before) < min_points:
        return None
    middle = median(before)
    if value - middle <= max((factor - 1.0) * abs(middle), TINY):
        return None  # the cheap margin first: the deviation is needed only past it
    found = Spike(i, middle, MAD_SCALE * median([abs(v - middle) for v in before]))
    return found if found.above(value, z, factor) else None


def _floor(values: Sequence[float], lo: int, hi: int, window: int, factor: float) -> float:
    """A value that every spike among the points [lo, hi) is above (their windows all finite)."""
    k = (min(lo, window) + 1) // 2  # the smallest window's median is at least its k-th smallest
    bound = sorted(values[max(0, lo - window) : hi - 1])[k - 1]
    # A hair below: the rule's own comparison (value - median > margin) rounds differently.
    return factor * bound * (1.0 - 1e-9) if bound >= 0 else bound


BLOCK: Final = 16  # points bounded together once the whole tail's bound is not enough


def newest_spike(
    values: Sequence[float], start: int, window: int, min_points: int, z: float, factor: float
) -> Spike | None:
    """The newest point at or after `start` that spikes over the window before it: the whole
    tail's bound first (one sort: a converged or noisy loss ends there), then blocks' bounds
    (a falling loss, whose early points are above the tail's), then each point left. A NaN or
    an infinity anywhere: no bound, each point is looked at."""
    start = max(start, min_points)
    if start >= len(values):
        return None
    bounded = all(map(math.isfinite, values))
    if bounded:
        floor = _floor(values, start, len(values), window, factor)
        if not any(v > floor for v in values[start:]):
            return None
    hi = len(values)
    while hi > start:
        lo = max(start, hi - BLOCK)
        if not bounded or any(v > floor for v in values[lo:hi]):
            block = _floor(values, lo, hi, window, factor) if bounded else -math.inf
            for i in range(hi - 1, lo - 1, -1):
                if values[i] > block and (
                    found := window_spike(values, i, window, min_points, z, factor)
                ):
                    return found
        hi = lo
    return None
