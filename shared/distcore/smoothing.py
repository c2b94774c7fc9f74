"""TensorBoard's scalar smoothing: an exponential moving average with debiasing.

TensorBoard (vz_line_chart2) starts the average at 0 and divides by `1 - weight**n`, so the first
points are not dragged towards zero; non-finite values pass through unsmoothed and do not enter
the average; a constant series is returned as is (no float noise). We do exactly the same so that a
curve in distmon looks like the one users know from the browser.

Two forms of one rule: `debiased_ema` over a list (the alert rules' small windows, and the
reference the tests hold the other to), and `debiased_ema_array` over a numpy array (the chart's
whole series, read from the store's own arrays without a Python float per point). numpy is
imported on first use only: the dashboard's first screen comes before numpy is loaded.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    F64 = npt.NDArray[np.float64]

DEFAULT_WEIGHT = 0.6
WEIGHT_STEP = 0.1
MAX_WEIGHT = 0.99


def debiased_ema(values: Sequence[float], weight: float = DEFAULT_WEIGHT) -> list[float]:
    """Smooth `values` with TensorBoard's debiased EMA; `weight` in [0, 1), 0 = no smoothing."""
    _check(weight)
    if not values or all(v == values[0] for v in values):
        return list(values)
    smoothed = _ema(values, weight)
    if math.inf in smoothed or -math.inf in smoothed:  # an input, or an overflow: make sure
        return _bounded_ema(values, weight)
    return smoothed


def _check(weight: float) -> None:
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")


@functools.lru_cache(maxsize=8)
def debiasing_divisors(weight: float, points: int) -> tuple[float, ...]:
    """1 - weight**k for k = 1..points: what the k-th finite point's average is divided by.
    Made once per (weight, length): the alert rules smooth every changed run's 60-point tail,
    and a power per point was most of that cost."""
    return tuple(1.0 - weight**k for k in range(1, points + 1))


def _ema(values: Sequence[float], weight: float) -> list[float]:
    divisors = debiasing_divisors(weight, len(values))
    rest = 1.0 - weight
    last = 0.0
    accumulated = 0
    smoothed: list[float] = []
    for value in values:
        if not math.isfinite(value):
            smoothed.append(value)
            continue
        last = last * weight + rest * value
        smoothed.append(last / divisors[accumulated])
        accumulated += 1
    return smoothed


def _bounded_ema(values: Sequence[float], weight: float) -> list[float]:
    """The same, safe near the largest floats (1.7e308), where rounding in the sum or in the
    debiasing division would smooth a finite series to infinity: the average runs at half
    scale, and each output, a weighted mean of the finite values so far, is kept within their
    range."""
    last = 0.0
    accumulated = 0
    low, high = math.inf, -math.inf
    smoothed: list[float] = []
    for value in values:
        if not math.isfinite(value):
            smoothed.append(value)
            continue
        low, high = min(low, value), max(high, value)
        last = last * weight + (1.0 - weight) * (value * 0.5)
        accumulated += 1
        mean = last / (1.0 - weight**accumulated) * 2.0
        smoothed.append(min(high, max(low, mean)))
    return smoothed


def debiased_ema_array(values: Any, weight: float = DEFAULT_WEIGHT) -> F64:
    """`debiased_ema` over an array (or a `Column` view of one), as an array: the same rule,
    equal within float rounding (exactly equal for the first two finite points, for non-finite
    values and for a constant series). A series that needs no smoothing (empty, constant,
    weight 0) comes back as the very array it was, without a copy; `values` is never written."""
    import numpy as np

    _check(weight)
    array = np.asarray(values)
    if array.dtype != np.float64:
        array = array.astype(np.float64)
    if not len(array) or weight == 0.0 or bool((array == array[0]).all()):
        return array
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is seen, and bounded
        return _smoothed(array, weight)


def _smoothed(array: F64, weight: float) -> F64:
    import numpy as np

    finite = np.isfinite(array)
    kept = array[finite]
    smoothed = array.copy()  # non-finite values pass through, outside the average
    smoothed[finite] = _debiased(kept, weight, 1.0)
    if np.isinf(smoothed).any():  # an input, or an overflow: as _bounded_ema does
        mean = _debiased(kept, weight, 0.5) * 2.0
        low, high = np.minimum.accumulate(kept), np.maximum.accumulate(kept)
        smoothed[finite] = np.minimum(high, np.maximum(low, mean))
    return smoothed


def _debiased(values: F64, weight: float, scale: float) -> F64:
    """The EMA of `values * scale` (all finite) started at 0, divided by its bias."""
    import numpy as np

    terms = (1.0 - weight) * (values * scale if scale != 1.0 else values)
    summed = _scan(terms, weight)
    # Past n where weight**n < 2**-54, 1 - weight**n rounds to 1.0: the bias is only divided
    # out before that (at most ~4,100 powers at weight 0.99), the same quotients for less.
    biased = min(len(values), math.ceil(54 * math.log(2) / -math.log(weight)) + 2)
    summed[:biased] /= 1.0 - weight ** np.arange(1, biased + 1, dtype=np.float64)
    return summed


def _scan(terms: F64, weight: float) -> F64:
    """s[i] = weight * s[i-1] + terms[i] (s[-1] = 0), in log2(n) vectorised passes rather than
    n Python steps: after the pass with shift k, s[i] sums terms[i-j] * weight**j for j < 2k.
    The same sum as the recurrence, added up in another order: equal within rounding."""
    summed = terms.copy()
    shift, factor = 1, weight
    while shift < len(summed) and factor > 0.0:  # weight**shift underflowed: nothing to add
        summed[shift:] = summed[shift:] + factor * summed[:-shift]  # right side read first
        shift, factor = shift * 2, factor * factor
    return summed


def adjust_weight(weight: float, delta: float) -> float:
    """The next smoothing weight after a key press: clamped to [0, MAX_WEIGHT], one decimal."""
    return round(min(MAX_WEIGHT, max(0.0, weight + delta)), 2)
