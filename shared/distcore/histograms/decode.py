"""Histogram values of a Summary, from every writer TensorBoard reads:

- TF2 `tf.summary.histogram`: a tensor of (left edge, right edge, count) rows with the
  "histograms" plugin's metadata (float64; float32 and float16 from other writers);
- tf1 `tf.compat.v1.summary.histogram`, tensorboardX and PyTorch's SummaryWriter: the `histo`
  field, a HistogramProto (min, max, num, sum, sum_squares, bucket_limit, bucket).

Untrusted like every event: a histogram with more than MAX_BUCKETS buckets, mismatched arrays or
a tensor of another shape is refused (HistogramError); counts that are negative or not finite
count as empty buckets, as no writer makes them.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from tensorboard.compat.proto import summary_pb2, tensor_pb2

from distcore.histograms.buckets import Buckets
from distcore.tensors import FLOATS, tensor_values

HISTOGRAMS_PLUGIN: Final = "histograms"
HISTO_FIELD: Final = summary_pb2.Summary.Value.DESCRIPTOR.fields_by_name["histo"].number
MAX_BUCKETS: Final = 100_000  # TF1's default buckets are ~1,550; TF2 writes 30


class HistogramError(ValueError):
    """A histogram value that cannot be one."""


def _clean(counts: np.ndarray) -> np.ndarray:
    counts = np.asarray(counts, dtype=np.float64)
    return np.where(np.isfinite(counts) & (counts > 0), counts, 0.0)


def from_histo_proto(data: bytes) -> Buckets:
    proto = summary_pb2.HistogramProto.FromString(data)
    if len(proto.bucket) != len(proto.bucket_limit):
        raise HistogramError(f"histogram with {len(proto.bucket)} counts for "
                             f"{len(proto.bucket_limit)} bucket limits")
    if len(proto.bucket) > MAX_BUCKETS:
        raise HistogramError(f"histogram with {len(proto.bucket)} buckets")
    return Buckets(counts=_clean(np.array(proto.bucket)),
                   right=np.array(proto.bucket_limit, dtype=np.float64),
                   low=float(proto.min), high=float(proto.max), num=float(proto.num), proto=True)


def from_tensor(data: bytes) -> Buckets | None:
    """None for a 0-d tensor: no histogram, and the reader's fast path drops a scalar tensor
    under another plugin's tag without a word, so this path must too (both read alike)."""
    proto = tensor_pb2.TensorProto.FromString(data)
    if not proto.tensor_shape.dim:
        return None
    if proto.dtype not in FLOATS:
        raise HistogramError(f"histogram tensor of unsupported dtype {proto.dtype}")
    dims = [d.size for d in proto.tensor_shape.dim]
    if len(dims) != 2 or dims[1] != 3 or not 0 <= dims[0] <= MAX_BUCKETS:
        raise HistogramError(f"histogram tensor of shape {dims} (expected [k, 3])")
    values = tensor_values(proto)
    if values.size != dims[0] * 3:
        raise HistogramError(f"histogram tensor with {values.size} values for shape {dims}")
    with np.errstate(invalid="ignore"):  # a signalling NaN's cast warns; it is a NaN all the same
        rows = values.astype(np.float64).reshape(dims[0], 3)
    counts = _clean(rows[:, 2])
    if len(rows) == 0:
        return Buckets(counts=counts, right=rows[:, 1], low=0.0, high=0.0, num=0.0, proto=False)
    with np.errstate(over="ignore"):  # counts near float64's largest sum to inf: no warning
        num = float(counts.sum())
    return Buckets(counts=counts, right=rows[:, 1], low=float(rows[0, 0]),
                   high=float(rows[-1, 1]), num=num, proto=False)
