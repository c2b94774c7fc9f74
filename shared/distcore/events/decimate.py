"""Pure decimation for bounded series: keep first, last, and each step-bucket's min and max."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


def keep_indices(steps: I64, values: npt.NDArray[np.float64], target: int) -> I64:
    """Indices (ascending) of at most `target` points that keep the curve's shape.

    The step range is cut into equal-width buckets; each keeps its lowest and highest value
    (NaN counts as highest, so a divergence stays visible). Equal-width in steps, not in points,
    so that points kept from earlier rounds are not thinned more than new ones.
    """
    n = len(steps)
    if n <= target:
        return np.arange(n, dtype=np.int64)
    buckets = max(1, (target - 2) // 2)
    first, last = int(steps[0]), int(steps[-1])
    span = float(max(1, last - first + 1))
    # In floats: steps near +-2**63 would overflow an int64 difference.
    offset = steps[1:-1].astype(np.float64) - float(first)
    bucket = np.clip(offset * buckets / span, 0, buckets - 1).astype(np.int64)
    order = np.lexsort((values[1:-1], bucket))
    grouped = bucket[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    ends = np.r_[starts[1:], len(order)] - 1
    inner = np.union1d(order[starts], order[ends]) + 1
    return np.r_[0, inner, n - 1].astype(np.int64)
