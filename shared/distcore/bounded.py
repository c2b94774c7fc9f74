"""Numbers read from files, made safe once, where they are parsed: a bounded float, a bounded
int, or None (unknown).

Anyone who can write a logdir writes run.json, the ledger and the event files' `perf/` tags. JSON
holds integers of any size (a 400-digit one makes `float()` and `math.isfinite` raise
OverflowError), `NaN` and `Infinity`, and `true` (a bool is an int in Python); an event file holds
any float. Every reader of such a field calls one of these functions, once, and everything past
it sees a finite number in the field's documented range, or None: a hostile value is an
unknown on its own job's row, never an exception in the code that renders every job.
"""

from __future__ import annotations

import math
from typing import Any, Final

from distcore import names

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
FLOAT_LIMIT: Final = 1e300
"""A default bound on any float: a product or a sum of two stays finite."""
MAX_SECONDS: Final = 1e10
"""A duration longer than this (three centuries) is no job's: unknown."""
MAX_TIMESTAMP: Final = 1e11
"""Wall time in seconds since 1970 (the year 5138): a later one is no clock's."""


def bounded_float(
    value: Any, lo: float = -FLOAT_LIMIT, hi: float = FLOAT_LIMIT
) -> float | None:
    """`value` as a float when it is a number (an int or a float, never a bool or a string),
    finite and within [lo, hi]; else None. Never raises, whatever `value` is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int) and not (INT64_MIN <= value <= INT64_MAX):
        return None  # compared as an int: float() of a huge one raises
    number = float(value)
    return number if math.isfinite(number) and lo <= number <= hi else None


def bounded_int(value: Any, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int | None:
    """`value` when it is an int (never a bool, never a float) within [lo, hi]; else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return int(value) if lo <= value <= hi else None


def seconds(value: Any) -> float | None:
    """A duration: finite, at least 0, at most MAX_SECONDS."""
    return bounded_float(value, 0.0, MAX_SECONDS)


def positive_seconds(value: Any) -> float | None:
    """A period that must be more than zero (a heartbeat's interval, a hang bound)."""
    found = seconds(value)
    return found if found is not None and found > 0 else None


def timestamp(value: Any) -> float | None:
    """Wall time in seconds since 1970, 0 to MAX_TIMESTAMP."""
    return bounded_float(value, 0.0, MAX_TIMESTAMP)


def fraction(value: Any) -> float | None:
    """A share of a whole: 0 to 1."""
    return bounded_float(value, 0.0, 1.0)


def step(value: Any) -> int | None:
    """A training step: an int64, as TensorFlow counts them."""
    return bounded_int(value)


# The `perf/` tags' documented ranges (distcore.names): a point outside its range is unknown to
# the alerts, the messages, the columns and the exported metrics alike.
PERF_RANGES: Final[dict[str, tuple[float, float]]] = {
    names.INPUT_WAIT_FRACTION: (0.0, 1.0),
    names.MFU: (0.0, 1.0),
    names.STEP_TIME_MS: (0.0, MAX_SECONDS * 1e3),
    names.INPUT_WAIT_MS: (0.0, MAX_SECONDS * 1e3),
    names.STEP_COMPUTE_SECONDS: (0.0, MAX_SECONDS),
    names.REDUCE_WAIT_SECONDS: (0.0, MAX_SECONDS),
    names.EXAMPLES_PER_SECOND: (0.0, FLOAT_LIMIT),
    names.MODEL_FLOPS_PER_SECOND: (0.0, FLOAT_LIMIT),
}


PERCENT: Final = (0.0, 100.0)
MAX_MIB: Final = 1e12  # an exbibyte: more memory than any host or GPU has
# What distagent's recorder writes into a job's `system/` runs (distcore.names.GPU_FIELDS,
# GPM_FIELDS and the host tags), by field: the GPU and host figures a logdir's hosts show.
SYSTEM_RANGES: Final[dict[str, tuple[float, float]]] = {
    "utilization": PERCENT,
    "memory_used_mib": (0.0, MAX_MIB),
    "power_w": (0.0, 1e6),
    "temperature_c": (-273.15, 1e4),
    **dict.fromkeys(names.GPM_FIELDS, PERCENT),
    names.HOST_CPU_PERCENT: PERCENT,
    names.HOST_MEMORY_USED_MIB: (0.0, MAX_MIB),
}


def system_value(field: str, value: Any) -> float | None:
    """A `system/` run's point of `field` (a GPU field or a host tag, SYSTEM_RANGES) within
    its range, else None."""
    return bounded_float(value, *SYSTEM_RANGES.get(field, (-FLOAT_LIMIT, FLOAT_LIMIT)))


def perf_value(tag: str, value: Any) -> float | None:
    """A `perf/` point within its tag's range (PERF_RANGES), else None; a point of another tag
    as a finite float, else None."""
    return bounded_float(value, *PERF_RANGES.get(tag, (-FLOAT_LIMIT, FLOAT_LIMIT)))


MAX_PRICE: Final = 1e6
"""USD per GPU-hour or per kWh: anything above is a typo, refused (distmon's flags, distagent's
`[cost]` keys, run.json's)."""


def price(value: Any) -> float | None:
    """A price from a file or a flag: a finite number in [0, MAX_PRICE], else None."""
    return bounded_float(value, 0.0, MAX_PRICE)
