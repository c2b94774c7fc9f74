"""How a figure reads, in the panels and in the `--once` report alike: a step, a loss (any
scalar), an input-wait share, an age, a measurement that may be unknown.

`None` is unknown: a dash in the dashboard's cells, "n/a" for a measurement, never a zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

from distcore import names

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


def compact(value: float, width: int, most: int = 4) -> str | None:
    """`value` in at most `width` characters with as many significant digits as fit (`most`
    at most), the exponent written short (`2e-2`, `-1.2e-5`, `1e8`); None where nothing fits.
    A number that does not fit never becomes another number, as a cut would make it."""
    if not math.isfinite(value):
        text = str(value)
        return text if len(text) <= width else None
    for digits in range(most, 0, -1):
        for text in _forms(value, digits):
            if len(text) <= width:
                return text
    return None


def _forms(value: float, digits: int) -> tuple[str, str]:
    """The number in `digits` significant digits: as Python's `g` writes it, then in powers of
    ten with the exponent's `+` and leading zeros dropped (`1e+08` -> `1e8`, 0.003 -> `3e-3`)."""
    mantissa, _, exponent = f"{value:.{digits - 1}e}".partition("e")
    return f"{value:.{digits}g}", f"{mantissa}e{int(exponent)}"


def fitted(text: str, width: int) -> str:
    """`text` within `width` characters: a number that does not fit loses significant digits
    (`0.1000000015` -> `0.1`, `-1.235e-05` -> `-1.2e-5`), never its leading ones or its
    exponent as a cut would, and is an ellipsis where no form fits; any other text is returned
    as it is (the caller cuts it)."""
    if len(text) <= width or "_" in text:  # float() reads 1_000; a cell showing it is text
        return text
    try:
        value = float(text)
    except ValueError:
        return text
    return compact(value, width) or "…"[:width]


def share(fraction: float | None) -> str:
    """The share of a step spent waiting for input: `34%`."""
    return UNKNOWN if fraction is None or not math.isfinite(fraction) else f"{fraction:.0%}"


def mfu_text(fraction: float | None) -> str:
    """Model FLOPs utilisation: `38%`, `4.2%` below 10 % (where a tenth of a point shows)."""
    if fraction is None or not math.isfinite(fraction):
        return UNKNOWN
    return f"{fraction:.1%}" if abs(fraction) < 0.1 else f"{fraction:.0%}"


def age_text(seconds: float | None) -> str:
    """How long ago a host was sampled: `12 s ago`."""
    return "never sampled" if seconds is None else f"{seconds:.0f} s ago"


def measured(value: float | None, unit: str = "", digits: int = 0) -> str:
    """A measurement (NVML, psutil): "n/a" where unknown or not finite, never zero."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.{digits}f}{unit}"


def _columns(*tags: str) -> tuple[str, ...]:
    return tuple(f"{t}{suffix}" for t in tags for suffix in ("", ".min", ".max", ".last"))


# Quantities with one form wherever a column of the table shows them: a share as the runs table
# and the ledger write it (`79%`), never `0.7912` beside it.
QUANTITIES: Final[dict[str, Callable[[float | None], str]]] = {
    **dict.fromkeys(_columns(names.GOODPUT, names.INPUT_WAIT_FRACTION), share),
    **dict.fromkeys(_columns(names.MFU), mfu_text),
}


def column_value(column: str, value: float | None) -> str | None:
    """A table column's number in its quantity's one form; None for a column with no such
    form (the caller writes the number as any scalar)."""
    form = QUANTITIES.get(column)
    return None if form is None else form(value)
