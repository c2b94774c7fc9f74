"""Pure decimation for bounded series: keep first, last, and each step-bucket's min and max."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


def keep_indices(steps: I64, values: F64, target: int) -> I64:
    """Indices (ascending) of at most `target` points that keep the curve's shape.

    The step range is cut into equal-width buckets; each keeps its lowest and highest value
    (NaN counts as highest, so a divergence stays visible; among equal values the lowest is
    the first, the highest the last). Equal-width in steps, not in points, so that points kept
    from earlier rounds are not thinned more than new ones. Steps strictly increase (the
    series' restart rule), so buckets are contiguous: no sort, a few passes over the points.
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
    inner = values[1:-1]
    starts = np.flatnonzero(_edges(bucket))
    sizes = np.diff(starts, append=len(inner))
    lows = _first_lowest(inner, starts, sizes)
    highs = _last_highest(inner, starts, sizes)
    pairs = np.sort(np.stack([lows, highs], axis=1), axis=1).ravel()
    pairs = pairs[_edges(pairs)] + 1
    return np.concatenate([[0], pairs, [n - 1]]).astype(np.int64)


def _edges(sorted_ids: I64) -> npt.NDArray[np.bool_]:
    """True where a value differs from the one before (always at 0). np.r_ is slow here."""
    edge = np.empty(len(sorted_ids), dtype=bool)
    edge[:1] = True
    np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=edge[1:])
    return edge


def _first_lowest(values: F64, starts: I64, sizes: I64) -> I64:
    """Per bucket: the first index of its lowest value (of its first NaN if all are NaN)."""
    with np.errstate(invalid="ignore"):
        low = np.fmin.reduceat(values, starts)
    hit = np.flatnonzero(values == np.repeat(low, sizes))
    found = np.full(len(starts), -1, dtype=np.int64)
    seg = np.searchsorted(starts, hit, side="right") - 1
    firsts = _edges(seg)
    found[seg[firsts]] = hit[firsts]
    return np.where(found >= 0, found, starts)


def _last_highest(values: F64, starts: I64, sizes: I64) -> I64:
    """Per bucket: the last NaN if it has any, else the last index of its highest value."""
    nan = np.isnan(values)
    with np.errstate(invalid="ignore"):
        high = np.fmax.reduceat(values, starts)
    has_nan = np.logical_or.reduceat(nan, starts)
    hit = np.flatnonzero(np.where(np.repeat(has_nan, sizes), nan, values == np.repeat(high, sizes)))
    seg = np.searchsorted(starts, hit, side="right") - 1
    lasts = np.roll(_edges(seg), -1)
    found = np.full(len(starts), -1, dtype=np.int64)
    found[seg[lasts]] = hit[lasts]
    return found


def stretch_share(step: int, prev: int, here: int) -> float:
    """How much of a thinned stretch lies before `step`: the kept point at `here` stands for
    the points read since the one kept at `prev`, and a purge from `step` (prev < step <= here)
    keeps their share before it, pro rata by step (what was thinned cannot be counted)."""
    return min(1.0, max(0.0, (step - prev - 1) / max(1, here - prev - 1)))
