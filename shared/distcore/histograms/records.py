"""What a histogram is once kept: the compressed points a run keeps per tag. Standard library
only, so that `distcore.events.snapshots` (every front end's snapshot types) can name it cheaply;
the writer's buckets, numpy arrays, are distcore.histograms.buckets."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HistogramPoint:
    step: int
    wall_time: float
    num: float
    """Values in the histogram."""
    bands: tuple[float, ...]
    """The value at each of compress.BASIS_POINTS (TensorBoard's distribution bands)."""


@dataclass(frozen=True)
class HistogramSeries:
    """One histogram tag of one run: kept points oldest first (at most the store's bound,
    thinned evenly among the older half), and the count of every point read."""

    tag: str
    points: tuple[HistogramPoint, ...]
    count: int

    @property
    def last(self) -> HistogramPoint:
        return self.points[-1]
