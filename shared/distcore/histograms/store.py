"""The histograms of one run, kept within a bound per tag, like the scalar series.

A point is 9 bands and a count (compressed when it is read, outside the store's lock), so a tag
costs at most `max_points` × ~100 bytes whatever its bucket count. Over the bound, every second
point of the older half is dropped: the recent points stay dense, the old ones thin out evenly,
and the first and the newest points always stay.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from distcore.histograms.records import HistogramPoint, HistogramSeries


class HistogramStore:
    def __init__(self, max_points: int) -> None:
        self.max_points = max(2, max_points)
        self._points: dict[str, list[HistogramPoint]] = {}
        self._counts: dict[str, int] = {}
        self._frozen: Mapping[str, HistogramSeries] | None = None

    def add(self, points: Iterable[tuple[str, HistogramPoint]]) -> None:
        for tag, point in points:
            self._frozen = None
            kept = self._points.setdefault(tag, [])
            kept.append(point)
            self._counts[tag] = self._counts.get(tag, 0) + 1
            if len(kept) > self.max_points:
                half = len(kept) // 2
                kept[:half] = kept[:half][::2]

    def purge_from(self, step: int) -> None:
        """A session restart at `step` (tf1 writers): points at or after it are superseded."""
        for tag, kept in self._points.items():
            keep = [p for p in kept if p.step < step]
            if len(keep) != len(kept):
                self._frozen = None
                self._counts[tag] -= len(kept) - len(keep)
                self._points[tag] = keep

    def clear(self) -> None:
        self._points, self._counts, self._frozen = {}, {}, None

    def snapshot(self) -> Mapping[str, HistogramSeries]:
        if self._frozen is None:
            self._frozen = MappingProxyType({
                tag: HistogramSeries(tag, tuple(points), self._counts[tag])
                for tag, points in sorted(self._points.items()) if points
            })
        return self._frozen
