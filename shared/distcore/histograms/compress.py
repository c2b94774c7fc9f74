"""TensorBoard's distribution bands: the value below which a share of the histogram lies, at
the basis points of a normal distribution's sigmas (min, -1.5σ, -σ, -½σ, median, ... max).

Written after TensorBoard's distributions plugin (tensorboard/plugins/distribution/
compressor.py, `compress_histogram` for TF2 tensors and `compress_histogram_proto` for
HistogramProto, after TensorFlow's Histogram::Percentile): cumulative weights at each basis
point, interpolated linearly inside the bucket that holds it, empty buckets skipped. Our own
code rather than an import: distcore must not reach into TensorBoard's plugin internals, and
this runs on numpy arrays the reader already holds.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np

from distcore.histograms.buckets import Buckets

BASIS_POINTS: Final = (0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10000)
BAND_KEYS: Final = tuple(f"{bp / 100:g}" for bp in BASIS_POINTS)
"""JSON keys of the bands: "0", "6.68", "15.87", "30.85", "50", ..., "100" (percent)."""


def compress(histogram: Buckets) -> tuple[float, ...]:
    """The value at each basis point, as TensorBoard's compressor computes it."""
    counts = histogram.counts
    if not histogram.num if histogram.proto else len(counts) == 0:
        return tuple(0.0 for _ in BASIS_POINTS)
    weights = _cumulative_weights(counts)
    right = histogram.right
    values: list[float] = []
    for bp in BASIS_POINTS:
        i = int(np.searchsorted(weights, bp, side="right"))
        while i < len(weights):
            cumsum = float(weights[i])
            previous = float(weights[i - 1]) if i > 0 else 0.0
            if cumsum == previous:  # an empty bucket: no interpolation inside it
                i += 1
                continue
            lhs = histogram.low if not i or not previous else max(float(right[i - 1]),
                                                                   histogram.low)
            rhs = min(float(right[i]), histogram.high)
            values.append(lhs + (bp - previous) * (rhs - lhs) / (cumsum - previous))
            break
        else:
            break
    values.extend(histogram.high for _ in range(len(BASIS_POINTS) - len(values)))
    return tuple(values)


def _cumulative_weights(counts: np.ndarray) -> np.ndarray:
    """TensorBoard's `cumsum(counts * 10000 / total)`, for any finite counts a writer leaves:
    counts near float64's largest overflow that product (and numpy would print a
    RuntimeWarning on the user's terminal), so those are scaled by the largest count first."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(counts.sum()) or 1.0
        weights = (counts * BASIS_POINTS[-1] / total).cumsum()
    if math.isfinite(total) and bool(np.isfinite(weights).all()):
        return weights
    scaled = counts / float(counts.max())  # every count in [0, 1]: no sum can overflow
    return (scaled * BASIS_POINTS[-1] / float(scaled.sum())).cumsum()
