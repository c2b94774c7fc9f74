"""One scalar series with bounded memory, the restart rule, and exact summary statistics.

Restart rule (TensorBoard's data server): a point at step s drops the kept points at steps >= s.
After the rule the kept steps strictly increase. Each kept point carries a weight, the number of
points read since the previous kept point, so `count` survives decimation exactly; only a purge
that falls between two kept points of a decimated stretch has to estimate how many of that
stretch's points it removed (pro rata by step), and min/max after such a purge are taken over
what was kept.

A loss series also feeds every point it reads, once, to a spike tracker (alerts.spikes), whose
bounded history the snapshot carries: a spike is known whatever the decimation kept.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

from distcore.alerts.series import LOSS_SPIKE_RULE
from distcore.alerts.spikes import BLOCK, SpikeTracker
from distcore.decimate import keep_indices, stretch_share
from distcore.events.snapshots import Column, Series
from distcore.tags import tag_kind
from distcore.tails import spike_candidates
from distcore.tfrecord.kernel import first_stats

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
_A = TypeVar("_A", I64, F64)


def survivors(steps: I64) -> npt.NDArray[np.bool_]:
    """Which points of a batch outlive the later points of the same batch (step < all later)."""
    later_min = np.minimum.accumulate(steps[::-1])[::-1]
    keep = np.ones(len(steps), dtype=bool)
    keep[:-1] = steps[:-1] < later_min[1:]
    return keep


def _increasing(steps: I64) -> bool:
    return len(steps) < 2 or bool((steps[1:] > steps[:-1]).all())


def _fmin(values: F64) -> float:
    return float(np.fmin.reduce(values)) if len(values) else float("nan")


def _fmax(values: F64) -> float:
    return float(np.fmax.reduce(values)) if len(values) else float("nan")


def _read_only(array: _A) -> _A:
    array.flags.writeable = False
    return array


# A new series' columns until its first points come, and the weights of points read once: the
# same read-only arrays for all (nothing writes a series' arrays in place: extend, purge and
# decimate make new ones), rather than four empty arrays and a column of ones (8 bytes a
# point) for each of a sweep's many series.
_NO_STEPS: I64 = _read_only(np.zeros(0, dtype=np.int64))
_NO_VALUES: F64 = _read_only(np.zeros(0, dtype=np.float64))
_ONES: list[I64] = [_read_only(np.ones(4096, dtype=np.int64))]


def _ones(count: int) -> I64:
    ones = _ONES[0]
    if len(ones) < count:
        ones = _ONES[0] = _read_only(np.ones(max(count, 2 * len(ones)), dtype=np.int64))
    return ones[:count]


BOUNDED_BATCH = 256
"""New points from which numpy bounds a loss's blocks for its spike tracker; fewer (a live
run's few new points) take the tracker's one bound, cheaper than numpy's calls."""


def _first_stats(steps: I64, values: F64) -> tuple[bool, float, float]:
    """(_increasing(steps), _fmin(values), _fmax(values)): the decoder's kernel answers where
    it can (kernel.first_stats), numpy elsewhere."""
    found = first_stats(steps, values)
    return found if found is not None else (_increasing(steps), _fmin(values), _fmax(values))


class SeriesBuffer:
    """Mutable, owned by one run under the store's lock; `snapshot()` freezes it."""

    def __init__(self, tag: str, max_points: int) -> None:
        self.tag = tag
        self.max_points = max_points
        self.steps: I64 = _NO_STEPS
        self.values: F64 = _NO_VALUES
        self.walls: F64 = _NO_VALUES
        self.weights: I64 = _NO_STEPS
        self.count = 0
        self.min = float("nan")
        self.max = float("nan")
        self._frozen: Series | None = None
        self.spikes = SpikeTracker(LOSS_SPIKE_RULE) if tag_kind(tag) == "loss" else None

    def _track(self, steps: I64, walls: F64, values: F64) -> None:
        """Points that are the series' from here, in order, to its spike tracker."""
        if self.spikes is None or not len(values):
            return
        rule = self.spikes.rule
        candidates = None if len(values) < BOUNDED_BATCH else spike_candidates(
            self.spikes.recent(), values, rule.window, rule.min_points, BLOCK, rule.factor)
        self.spikes.feed(Column(steps), Column(walls), Column(values), candidates)

    def _track_purge(self, step: int) -> None:
        if self.spikes is not None:
            self.spikes.purge_from(step, self.values[-self.spikes.rule.window:].tolist())

    def __len__(self) -> int:
        return len(self.steps)

    def extend(self, steps: I64, walls: F64, values: F64) -> None:
        """Append points in the order they were written (the batch may hold restarts)."""
        if len(steps) == 0:
            return
        self._frozen = None
        if not len(self.steps) and len(steps) <= self.max_points:
            increasing, low, high = _first_stats(steps, values)
            if increasing:  # a run's first read: nothing to merge or purge
                self._first(steps, walls, values, low, high)
                return
        first_new = int(steps.min())
        purged = len(self.steps) and first_new <= int(self.steps[-1])
        if purged:
            self._purge_from(first_new)
            self._track_purge(first_new)
        keep = survivors(steps)
        kept_steps = steps[keep]
        self._track(kept_steps, walls[keep], values[keep])
        # Points of the batch that a later point of it purged were never counted.
        weights = np.ones(len(kept_steps), dtype=np.int64)
        self.steps = np.concatenate([self.steps, kept_steps])
        self.values = np.concatenate([self.values, values[keep]])
        self.walls = np.concatenate([self.walls, walls[keep]])
        self.weights = np.concatenate([self.weights, weights])
        self.count += len(kept_steps)
        if purged:
            self.min, self.max = _fmin(self.values), _fmax(self.values)
        else:
            self.min = _fmin(np.array([self.min, _fmin(values[keep])]))
            self.max = _fmax(np.array([self.max, _fmax(values[keep])]))
        if len(self.steps) > self.max_points:
            self._decimate()

    def _first(self, steps: I64, walls: F64, values: F64, low: float, high: float) -> None:
        """The batch's arrays are the series' own from here (the decoder made them for it)."""
        self.steps, self.walls, self.values = steps, walls, values
        self._track(steps, walls, values)
        self.weights = _ones(len(steps))
        self.count = len(steps)
        self.min, self.max = low, high

    def purge_from(self, step: int) -> None:
        """Drop the points at steps >= step (a restart of the whole run)."""
        if len(self.steps) and step <= int(self.steps[-1]):
            self._frozen = None
            self._purge_from(step)
            self._track_purge(step)
            self.min, self.max = _fmin(self.values), _fmax(self.values)

    def _purge_from(self, step: int) -> None:
        cut = int(np.searchsorted(self.steps, step, side="left"))
        removed = int(self.weights[cut:].sum())
        if 0 < cut < len(self.steps) and self.weights[cut] > 1:
            # The first dropped point stood for a stretch; the part before `step` stays.
            prev, here = int(self.steps[cut - 1]), int(self.steps[cut])
            removed -= round(int(self.weights[cut] - 1) * stretch_share(step, prev, here))
        self.count -= removed
        self.steps, self.values = self.steps[:cut], self.values[:cut]
        self.walls, self.weights = self.walls[:cut], self.weights[:cut]

    def _decimate(self) -> None:
        keep = keep_indices(self.steps, self.values, max(2, self.max_points // 2))
        # A dropped point's weight moves to the next kept point.
        totals = np.cumsum(self.weights)[keep]
        self.weights = np.diff(totals, prepend=0).astype(np.int64)
        self.steps, self.values, self.walls = self.steps[keep], self.values[keep], self.walls[keep]

    def snapshot(self) -> Series:
        if self._frozen is None:
            # The snapshot shares the arrays: they are never written after they are built
            # (extend, purge and decimate make new ones), so making them read-only is enough
            # (a read-only view would be 112 bytes more, three per series of a sweep).
            self._frozen = Series(
                tag=self.tag,
                steps=Column(_read_only(self.steps)),
                values=Column(_read_only(self.values)),
                wall_times=Column(_read_only(self.walls)),
                last_step=int(self.steps[-1]),
                last_value=float(self.values[-1]),
                last_wall_time=float(self.walls[-1]),
                count=self.count,
                min=self.min,
                max=self.max,
                spike_history=self.spikes.history() if self.spikes is not None else None,
            )
        return self._frozen

