"""TensorBoard's scalar smoothing: an exponential moving average with debiasing.

TensorBoard (vz_line_chart2) starts the average at 0 and divides by `1 - weight**n`, so the first
points are not dragged towards zero; non-finite values pass through unsmoothed and do not enter
the average; a constant series is returned as is (no float noise). We do exactly the same so that a
curve in distmon looks like the one users know from the browser.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

DEFAULT_WEIGHT = 0.6
WEIGHT_STEP = 0.1
MAX_WEIGHT = 0.99


def debiased_ema(values: Sequence[float], weight: float = DEFAULT_WEIGHT) -> list[float]:
    """Smooth `values` with TensorBoard's debiased EMA; `weight` in [0, 1), 0 = no smoothing."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    if not values or all(v == values[0] for v in values):
        return list(values)
    smoothed = _ema(values, weight)
    if math.inf in smoothed or -math.inf in smoothed:  # an input, or an overflow: make sure
        return _bounded_ema(values, weight)
    return smoothed


def _ema(values: Sequence[float], weight: float) -> list[float]:
    last = 0.0
    accumulated = 0
    smoothed: list[float] = []
    for value in values:
        if not math.isfinite(value):
            smoothed.append(value)
            continue
        last = last * weight + (1.0 - weight) * value
        accumulated += 1
        smoothed.append(last / (1.0 - weight**accumulated))
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


def adjust_weight(weight: float, delta: float) -> float:
    """The next smoothing weight after a key press: clamped to [0, MAX_WEIGHT], one decimal."""
    return round(min(MAX_WEIGHT, max(0.0, weight + delta)), 2)
