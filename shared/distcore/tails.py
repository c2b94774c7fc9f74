"""The point rules' tail arithmetic over a series' numpy columns, with the rules' own results.

distcore.alerts looks at the newest points of every run of a sweep (10,000 small runs): done
item by item over the store's Columns, the cadence and the rising-loss rule were most of the job
index's cost. Here the same arithmetic runs on the float64 arrays the Columns share:

- `RiseCheck.quiet` is a proof, not an estimate: over many runs' tails at once, it says True
  only where loss_rising's exact rule cannot fire (see its comment for the bound), so the exact
  EMA, whose floats the alert's message shows, runs only for the few tails that may be rising.
- `steady_cadences` is usual_interval's gap median over many runs' tails at once, float for
  float the same (the same IEEE subtractions, statistics.median's formula), where it is plain.

One run's numpy calls cost about what its Python loop does (60 points); many runs' tails in one
array are where numpy pays, so the job index asks for the facts of all changed jobs together.

Imported by the rules on first use, so that importing distcore.alerts stays free of numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]

# |x| within these bounds: no overflow or underflow can break the relative error bound below.
_SAFE_LOW: Final = 1e-200
_SAFE_HIGH: Final = 1e200
_TOLERANCE: Final = 1e-12  # relative to max |x|: ~100x the two computations' error bound


def float_tail(values: Sequence[Any], n: int) -> F64 | None:
    """The newest n items as a float64 array (a store's Column: a view, no copy), or None when
    they are not float64 (a hand-built series of ints takes the rules' Python path)."""
    tail = values[-n:] if len(values) > n else values
    array = np.asarray(tail)
    return array if array.dtype == np.float64 and array.ndim == 1 else None


def _weights(weight: float, points: int) -> F64:
    """Row k: the debiased EMA's value after k+1 points as weights over those points."""
    rest = 1.0 - weight
    lags = np.arange(points)[:, None] - np.arange(points)[None, :]
    powers = np.where(lags >= 0, weight ** np.maximum(lags, 0).astype(np.float64), 0.0)
    divisors = 1.0 - weight ** np.arange(1, points + 1, dtype=np.float64)
    matrix: F64 = rest * powers / divisors[:, None]
    return matrix


class RiseCheck:
    """`quiet`, for one weight and window; the weight matrix is built once."""

    def __init__(self, weight: float, window: int, points: int, fraction: float,
                 steady: float) -> None:
        self.window, self.points, self.fraction, self.steady = window, points, fraction, steady
        self._weights = _weights(weight, points)[points - window:].T.copy()  # (points, window)

    def quiet(self, tails: F64) -> npt.NDArray[np.bool_]:
        """For each row of `tails` (the newest `points` values of a loss each): True only when
        loss_rising's rule, run exactly on it, cannot fire (a NaN or an infinity, too few rising
        steps, too little rise). False: the exact rule decides.

        Why it is safe: the rule's EMA (a recurrence in floats) and this one (each smoothed
        value a weighted sum, the weights summing to 1) both stay within ~100 ulp of max|x| (M)
        of the real-number EMA while M is within the safe bounds; so each of our smoothed
        values is within tol = 1e-12 M of the rule's. A step that rises in the rule's window
        is then a step above -2 tol here; the rule's rise (last minus lowest) is at most ours
        plus 2 tol, and its lowest at least ours minus tol in size. The margins below (3 tol,
        4 tol, 1e-9) also cover the rounding of these few operations. Outside the bounds the
        answer is False."""
        with np.errstate(all="ignore"):
            finite = np.asarray(np.isfinite(tails).all(axis=1))
            top = np.abs(np.where(finite[:, None], tails, 0.0)).max(axis=1)
            safe = finite & (top > _SAFE_LOW) & (top < _SAFE_HIGH)
            smoothed = np.where(safe[:, None], tails, 0.0) @ self._weights
            tol = (_TOLERANCE * top)[:, None]
            rises = smoothed[:, 1:] - smoothed[:, :-1]
            few = np.count_nonzero(rises > -3 * tol, axis=1) < self.steady * (self.window - 1)
            low = smoothed.min(axis=1)
            rise = smoothed[:, -1] - low
            floor = self.fraction * np.maximum(np.abs(low) - tol[:, 0], 1e-12) * (1 - 1e-9)
            small = rise + 4 * tol[:, 0] < floor
        quiet: npt.NDArray[np.bool_] = ~finite | (safe & (few | small))
        return quiet


def steady_cadences(walls: F64, burst_gap: float) -> list[float | None]:
    """For each row of `walls` (a tail of wall times each): its median gap, as usual_interval
    computes it, when every gap is valid (finite, not going back) and the median is at least
    `burst_gap`, the case of nearly every writer; None where usual_interval must decide (a
    burst writer, a clock that went back). Equal gaps are equal floats (gaps are >= 0, and a
    zero median is never returned), so the order sorting leaves them in cannot matter."""
    later, earlier = walls[:, 1:], walls[:, :-1]
    with np.errstate(all="ignore"):
        steps = later - earlier
        valid = np.asarray((np.isfinite(steps) & (later >= earlier)).all(axis=1))
    ordered = np.sort(steps, axis=1)
    half = ordered.shape[1] // 2
    if ordered.shape[1] % 2:  # statistics.median's formula: the middle, or the two's mean
        middle = ordered[:, half].tolist()
    else:
        middle = [(a + b) / 2 for a, b in zip(ordered[:, half - 1].tolist(),
                                              ordered[:, half].tolist(), strict=True)]
    return [m if ok and m >= burst_gap else None
            for m, ok in zip(middle, valid.tolist(), strict=True)]


def stack(rows: Sequence[F64]) -> F64:
    stacked: F64 = np.stack(rows)
    return stacked
