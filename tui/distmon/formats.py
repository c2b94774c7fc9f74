"""How a figure reads, in the panels and in the `--once` report alike: a step, a loss (any
scalar), an input-wait share, an age, a measurement that may be unknown.

`None` is unknown: a dash in the dashboard's cells, "n/a" for a measurement, never a zero.
"""

from __future__ import annotations

import math

UNKNOWN = "–"


def step_text(step: int | None) -> str:
    return UNKNOWN if step is None else str(step)


def number(value: float | None, digits: int = 4) -> str:
    """A scalar's value in `digits` significant digits; NaN and infinities by name."""
    if value is None:
        return UNKNOWN
    if math.isnan(value) or math.isinf(value):
        return str(value)
    return f"{value:.{digits}g}"


def share(fraction: float | None) -> str:
    """The share of a step spent waiting for input: `34%`."""
    return UNKNOWN if fraction is None or not math.isfinite(fraction) else f"{fraction:.0%}"


def age_text(seconds: float | None) -> str:
    """How long ago a host was sampled: `12 s ago`."""
    return "never sampled" if seconds is None else f"{seconds:.0f} s ago"


def measured(value: float | None, unit: str = "", digits: int = 0) -> str:
    """A measurement (NVML, psutil): "n/a" where unknown or not finite, never zero."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.{digits}f}{unit}"
