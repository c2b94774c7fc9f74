"""One histogram as the writer gave it: its buckets, numpy arrays (decode.py builds them,
compress.py and points.py read them)."""

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
