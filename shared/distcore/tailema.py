"""TensorBoard's debiased EMA (distcore.smoothing) for a short tail of finite values, faster.

loss_rising smooths the newest 60 points of every changed run's loss; smoothing.debiased_ema
tests each point for finiteness and raises the weight to a power per point. For a tail whose
points are all finite the k-th divisor is always 1 - weight**k, so here the divisors are made
once, and the loop does the same operations in the same order: float for float the same result
(tests/core/test_index_oracle.py compares the rules with the ones as they were). No numpy: the
dashboard imports the rules before the reader.
"""

from __future__ import annotations

import functools
import math

from distcore.smoothing import DEFAULT_WEIGHT, debiased_ema

WEIGHT = DEFAULT_WEIGHT


@functools.lru_cache(maxsize=8)
def divisors(points: int) -> tuple[float, ...]:
    """1 - weight**k for k = 1..points, computed as smoothing._ema computes each."""
    return tuple(1.0 - WEIGHT**k for k in range(1, points + 1))


def finite_ema(values: list[float], divisors: tuple[float, ...]) -> list[float]:
    """`debiased_ema(values)` for `values` all finite and at most len(divisors) of them. An
    overflow (values near 1.7e308) is left to debiased_ema, which takes its bounded path."""
    if values.count(values[0]) == len(values) or len(values) > len(divisors):
        return debiased_ema(values)  # constant (returned as is), or longer than the divisors
    weight, rest = WEIGHT, 1.0 - WEIGHT
    last = 0.0
    smoothed = []
    for value, divisor in zip(values, divisors, strict=False):
        last = last * weight + rest * value
        smoothed.append(last / divisor)
    if math.inf in smoothed or -math.inf in smoothed:
        return debiased_ema(values)
    return smoothed
