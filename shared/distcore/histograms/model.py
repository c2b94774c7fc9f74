"""What a histogram is once read: its buckets (as the writer gave them), and the compressed
points a run keeps per tag."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Buckets:
    """One histogram: `counts[i]` values in (right[i-1], right[i]]; the first bucket starts at
    `low` and the values span [low, high]. `proto`: from a HistogramProto (tf1, tensorboardX,
    PyTorch: bucket_limit are right edges, min/max the values' range) rather than a TF2 tensor
    of (left, right, count) rows; TensorBoard's compressor treats the two slightly apart."""

    counts: F64
    right: F64
    low: float
    high: float
    num: float
    proto: bool


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
