"""Where a series spiked: the newest point far above the median of the points before it.

A robust rule: the reference is the median of the `window` points before each point, and the
spread its median absolute deviation (MAD, scaled by 1.4826 to read as a standard deviation for
normal noise), so a few earlier spikes, or NaNs, move neither. A point spikes when it is above
that median by more than `z` deviations *and* by `factor - 1` times the median's size (for a
positive loss: `factor` times the median): the first keeps a noisy series' usual swings out,
the second a flat one's tiny ones.

Every point of a series is looked at once, as it is read (`SpikeTracker`, one per loss series
in the store), so a spike that recovered stays known after the run moved on and when a finished
run is first read: the tracker keeps the newest KEPT stretches of spiking points and counts all.
Its cost per point is fixed and small: the caller may say which points can spike at all (the
store bounds blocks of points below with numpy, distcore.tails.spike_candidates: a window's
median is at least the k-th smallest of any set of points that holds the window), and only those
get their own median. tests/core/oracle_rules.py holds the plain form (every point's median).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
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


BLOCK: Final = 16  # points bounded below together (distcore.tails.spike_candidates)
KEPT: Final = 16  # stretches a series remembers: the newest (all are counted)


@dataclass(frozen=True)
class SpikeRule:
    """The spike rule's thresholds (distcore.alerts.series names the loss's)."""

    window: int
    min_points: int
    z: float
    factor: float
    back_z: float  # back within `back_z` deviations of the median before the spike ...
    back_factor: float  # ... or within `back_factor` times it: it came back

    def spike(self, values: Sequence[float], i: int) -> Spike | None:
        return window_spike(values, i, self.window, self.min_points, self.z, self.factor)


@dataclass(frozen=True)
class SpikeSeen:
    """A stretch of spiking points, by its first: where and how high, over which median, and
    the first later point back within the rule's margin of that median (None: not yet)."""

    step: int
    wall_time: float
    value: float
    median: float
    deviation: float
    back_step: int | None = None
    back_value: float | None = None

    def came_back(self, value: float, rule: SpikeRule) -> bool:
        return not Spike(0, self.median, self.deviation).above(value, rule.back_z,
                                                               rule.back_factor)


@dataclass(frozen=True)
class SpikeHistory:
    """A series' spikes as read so far: the newest KEPT stretches (oldest first), how many
    there were in all, and whether the newest point is a spike (its stretch goes on)."""

    spikes: tuple[SpikeSeen, ...] = ()
    count: int = 0
    last_spiked: bool = False


class SpikeTracker:
    """Every point of one series, fed once in order; `history()` what it saw. Memory: the
    window before the next point and KEPT stretches."""

    def __init__(self, rule: SpikeRule) -> None:
        self.rule = rule
        self._recent: list[float] = []  # the `window` points before the next one
        # A list cut to KEPT: an empty deque holds a block of 64 slots (760 bytes), and a
        # sweep has a tracker per loss series.
        self._spikes: list[SpikeSeen] = []
        self._count = 0
        self._last_spiked = False
        self._frozen: SpikeHistory | None = SpikeHistory()

    def recent(self) -> list[float]:
        """The points the next point's window holds (for the caller's bound)."""
        return list(self._recent)

    def feed(self, steps: Sequence[int], walls: Sequence[float], values: Sequence[float],
             candidates: Sequence[int] | None = None) -> None:
        """Points in the order written (lists, or numpy arrays: read only where needed).
        `candidates`: the indices (increasing) of the only points that may spike, where the
        caller bounded them; else one bound over the whole batch decides (`one_bound`)."""
        n = len(values)
        if not n:
            return
        self._frozen = None
        rule, held = self.rule, len(self._recent)
        if candidates is not None and not candidates and \
                all(s.back_step is not None for s in self._spikes):
            # Nothing to look at (most batches of a calm loss): the window moves on only.
            tail = values[-rule.window:]
            tolist = getattr(tail, "tolist", None)
            self._recent = (self._recent + (tolist() if tolist is not None else list(tail))
                            )[-rule.window:]
            self._last_spiked = False
            return
        tolist = getattr(values, "tolist", None)
        full = self._recent + (tolist() if tolist is not None else list(values))
        if candidates is None:
            candidates = one_bound(full, held, rule)
        looked = range(n) if candidates is None else candidates
        previous = -1 if self._last_spiked else None  # the index of the last spiking point
        for i in looked:
            found = rule.spike(full, held + i)
            if found is None:
                continue
            if previous != i - 1:  # a new stretch (a point of the current one adds nothing)
                self._spikes.append(SpikeSeen(int(steps[i]), float(walls[i]), full[held + i],
                                              found.median, found.deviation))
                del self._spikes[:-KEPT]
                self._count += 1
            previous = i
        self._last_spiked = previous == n - 1
        self._back(steps, full, held)
        self._recent = full[-rule.window:]

    def _back(self, steps: Sequence[int], full: list[float], held: int) -> None:
        """Each stretch not yet back: the first of the new points after it that is."""
        for k, seen in enumerate(self._spikes):
            if seen.back_step is not None:
                continue
            for j in range(held, len(full)):
                step = int(steps[j - held])
                if step > seen.step and seen.came_back(full[j], self.rule):
                    self._spikes[k] = replace(seen, back_step=step, back_value=full[j])
                    break

    def purge_from(self, step: int, recent: Sequence[float]) -> None:
        """A restart at `step`: its stretches and returns from there are forgotten, the window
        is the kept points before it (`recent`; thinned where the store decimated), and a
        stretch the restart cut ends there."""
        self._frozen = None
        kept = [s for s in self._spikes if s.step < step]
        self._count -= len(self._spikes) - len(kept)
        self._spikes = [s if s.back_step is None or s.back_step < step
                        else replace(s, back_step=None, back_value=None) for s in kept]
        self._recent = list(recent)[-self.rule.window:]
        self._last_spiked = False

    def history(self) -> SpikeHistory:
        if self._frozen is None:
            self._frozen = SpikeHistory(tuple(self._spikes), self._count, self._last_spiked)
        return self._frozen


def one_bound(full: Sequence[float], held: int, rule: SpikeRule) -> list[int] | None:
    """The indices past `held` (less `held`) of the points of `full` that may spike, by one
    bound for them all: every window among them lies in the union of their windows, whose
    k-th smallest (k: half the smallest window) is at most each window's median. None where a
    NaN or an infinity leaves no bound."""
    if not all(map(math.isfinite, full)):
        return None
    first = held + max(0, rule.min_points - held)  # fewer points before: no median, no spike
    if first >= len(full):
        return []
    k = (min(first, rule.window) + 1) // 2
    bound = sorted(full[max(0, first - rule.window):-1])[k - 1]
    # A hair below: the rule's own comparison (value - median > margin) rounds differently.
    floor = rule.factor * bound * (1.0 - 1e-9) if bound >= 0 else bound
    return [i - held for i in range(first, len(full)) if full[i] > floor]


def spike_history(steps: Sequence[int], walls: Sequence[float], values: Sequence[float],
                  rule: SpikeRule) -> SpikeHistory:
    """The history of points given whole (a series built by hand, not read by the store)."""
    tracker = SpikeTracker(rule)
    tracker.feed(list(steps), list(walls), list(values))
    return tracker.history()
