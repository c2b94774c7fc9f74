"""The histograms of one run, kept within a bound per tag, like the scalar series.

A point is 9 bands and a count (compressed when it is read, outside the store's lock), so a tag
costs at most `max_points` × ~100 bytes whatever its bucket count. Over the bound, every second
point of the older half is dropped: the recent points stay dense, the old ones thin out evenly,
and the first and the newest points always stay.

The restart rule is the scalars' (distcore.events.series) and TensorBoard's data server's, whose
reservoir preempts every time series alike, histograms included: a point at step s drops the
tag's kept points at steps >= s, so a writer that goes back (a job resumed from a checkpoint, in
the same file or a new one) shows the new histograms only. As in the scalar series, each kept
point weighs the points read since the previous kept one, so `count` (the points that outlive
the rule) stays exact through decimation; only a step that falls inside a thinned stretch has to
estimate how much of that stretch it drops (pro rata by step).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from distcore.decimate import stretch_share
from distcore.histograms.records import HistogramPoint, HistogramSeries


class HistogramStore:
    def __init__(self, max_points: int) -> None:
        self.max_points = max(2, max_points)
        self._points: dict[str, list[HistogramPoint]] = {}
        self._weights: dict[str, list[int]] = {}
        self._frozen: Mapping[str, HistogramSeries] | None = None

    def add(self, points: Iterable[tuple[str, HistogramPoint]]) -> None:
        for tag, point in points:
            self._frozen = None
            kept = self._points.setdefault(tag, [])
            weights = self._weights.setdefault(tag, [])
            if kept and point.step <= kept[-1].step:
                self._drop_from(tag, point.step)
            kept.append(point)
            weights.append(1)
            if len(kept) > self.max_points:
                _thin(kept, weights)

    def purge_from(self, step: int) -> None:
        """A session restart at `step` (tf1 writers): points at or after it are superseded."""
        for tag in self._points:
            self._drop_from(tag, step)

    def _drop_from(self, tag: str, step: int) -> None:
        kept, weights = self._points[tag], self._weights[tag]
        cut = bisect.bisect_left(kept, step, key=lambda p: p.step)  # steps strictly increase
        if cut == len(kept):
            return
        self._frozen = None
        if cut > 0 and weights[cut] > 1:
            # The first dropped point stood for a thinned stretch; its part before `step` stays.
            prev, here = kept[cut - 1].step, kept[cut].step
            weights[cut - 1] += round((weights[cut] - 1) * stretch_share(step, prev, here))
        del kept[cut:], weights[cut:]

    def clear(self) -> None:
        self._points, self._weights, self._frozen = {}, {}, None

    def snapshot(self) -> Mapping[str, HistogramSeries]:
        if self._frozen is None:
            self._frozen = MappingProxyType({
                tag: HistogramSeries(tag, tuple(points), sum(self._weights[tag]))
                for tag, points in sorted(self._points.items()) if points
            })
        return self._frozen


def _thin(kept: list[HistogramPoint], weights: list[int]) -> None:
    """Every second point of the older half goes; its weight moves to the next kept point."""
    half = len(kept) // 2
    points, merged, carry = [], [], 0
    for i in range(half):
        if i % 2 == 0:
            points.append(kept[i])
            merged.append(weights[i] + carry)
            carry = 0
        else:
            carry += weights[i]
    weights[half] += carry
    kept[:half], weights[:half] = points, merged
