"""TensorBoard's scalar smoothing: an exponential moving average with debiasing.

TensorBoard (vz_line_chart2) starts the average at 0 and divides by `1 - weight**n`, so the first
points are not dragged towards zero; non-finite values pass through unsmoothed and do not enter
the average; a constant series is returned as is (no float noise). We do exactly the same so that a
curve in distmon looks like the one users know from the browser.

One function, `debiased_ema`, for the alert rules and the charts alike: `debiased_ema_array` is
the same function over a store's array (a chart's series), and `debiased_ema_rows` the same
operations over many runs' tails at once (the job index's rising-loss rule); the tests hold
both equal to it, float for float. numpy is imported on first use only: the dashboard's first
screen comes before numpy is loaded.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
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
    if not values or weight == 0.0 or all(v == values[0] for v in values):
        return list(values)  # as it is: 0 smooths nothing, and keeps a -0.0 as -0.0
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
    return _ema_from(values, weight, 0.0, 0)[0]


def _ema_from(
    values: Sequence[float], weight: float, last: float, accumulated: int
) -> tuple[list[float], float, int]:
    """The recurrence over `values`, from its state after earlier points (`last`, the average
    so far, and how many finite points it holds), and its state after them."""
    if accumulated:  # the same expression as debiasing_divisors': the same floats
        divisors = tuple(1.0 - weight**k
                         for k in range(accumulated + 1, accumulated + len(values) + 1))
    else:
        divisors = debiasing_divisors(weight, len(values))
    rest = 1.0 - weight
    first = accumulated
    smoothed: list[float] = []
    for value in values:
        if not math.isfinite(value):
            smoothed.append(value)
            continue
        last = last * weight + rest * value
        smoothed.append(last / divisors[accumulated - first])
        accumulated += 1
    return smoothed, last, accumulated


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
    """`debiased_ema` over an array (or a `Column` view of one), as an array: the very same
    function (it runs `debiased_ema` on the array's floats), so a chart's curve and an alert's
    window never differ by a rounding. A series that needs no smoothing (empty, constant,
    weight 0) comes back as the very array it was, without a copy; `values` is never written.
    A series holds at most the store's `max_points`, so the loop is bounded."""
    import numpy as np

    _check(weight)
    array = np.asarray(values)
    if array.dtype != np.float64:
        array = array.astype(np.float64)
    if not len(array) or weight == 0.0 or bool((array == array[0]).all()):
        return array
    return np.array(debiased_ema(array.tolist(), weight), dtype=np.float64)


@dataclass(frozen=True, eq=False)
class EmaSoFar:
    """`debiased_ema_array(source, weight)` (`smoothed`), with what going on from it when
    points are appended needs: the recurrence's output before any shortcut, and its state."""

    source: F64
    weight: float
    ema: F64
    last: float
    accumulated: int
    smoothed: F64


def debiased_ema_grown(values: Any, weight: float, before: EmaSoFar | None) -> EmaSoFar:
    """`debiased_ema_array(values, weight)`, where `values` may be `before`'s series with
    points appended (a live series between two refreshes): then only the new points run the
    recurrence, from its state after the old ones, the same operations in the same order as
    over the whole series, so the same floats (tested equal)."""
    import numpy as np

    _check(weight)
    array = np.asarray(values, dtype=np.float64)
    head: F64 = np.empty(0)
    last, accumulated = 0.0, 0
    if before is not None and before.weight == weight and len(before.source) <= len(array) \
            and np.array_equal(array[:len(before.source)], before.source, equal_nan=True):
        if len(before.source) == len(array):  # nothing new: the very arrays of before
            return before
        head, last, accumulated = before.ema, before.last, before.accumulated
    tail, last, accumulated = _ema_from(array[len(head):].tolist(), weight, last, accumulated)
    ema = np.concatenate([head, np.array(tail, dtype=np.float64)])
    return EmaSoFar(array, weight, ema, last, accumulated, _finished(array, weight, ema))


def _finished(array: F64, weight: float, ema: F64) -> F64:
    """What debiased_ema returns, given the recurrence's output: its shortcuts and bounded
    path as it takes them."""
    import numpy as np

    if not len(array) or weight == 0.0 or bool((array == array[0]).all()):
        return array
    if np.isinf(ema).any():
        return np.array(_bounded_ema(array.tolist(), weight), dtype=np.float64)
    return ema


def debiased_ema_rows(rows: F64, weight: float = DEFAULT_WEIGHT) -> F64:
    """`_ema` of every row of `rows` (all of one length) at once: the same IEEE operations in
    the same order (`last * weight + (1 - weight) * value`, then `/ divisors[k]`), over a
    column of rows per step; numpy's elementwise float64 arithmetic rounds as Python's floats
    do. For finite rows (a non-finite value would pass through in `_ema`, not here) whose sum
    did not overflow: the caller checks the output for an infinity, as `debiased_ema` does,
    and takes the rule's own path there."""
    import numpy as np

    _check(weight)
    count, points = rows.shape
    divisors = debiasing_divisors(weight, points)
    rest = 1.0 - weight
    last = np.zeros(count)
    every: F64 = np.empty((count, points))
    with np.errstate(all="ignore"):
        for k in range(points):
            last = last * weight + rest * rows[:, k]
            every[:, k] = last / divisors[k]
    return every


def adjust_weight(weight: float, delta: float) -> float:
    """The next smoothing weight after a key press: clamped to [0, MAX_WEIGHT], one decimal."""
    return round(min(MAX_WEIGHT, max(0.0, weight + delta)), 2)
