"""What a job costs: GPU-hours (its ledger's wall × its GPUs, and per bucket), energy where the
counters give it, and money where a price is given.

The GPUs are those the job's `system/` runs recorded (every worker's, simulated ones included);
a job whose system runs hold no GPU is a CPU job: it has no GPU-hours (None, "no GPUs"), not a
zero that reads like a free job. The energy is the increase of every energy counter the system
runs recorded (`gpu/<i>/energy_joules`, NVML's; `host/energy_joules`, RAPL's) over the job's
life, summed: each counter's rises between consecutive points, so a counter that went back (a
driver reloaded, a resumed job's recorder starting over) adds nothing for that step instead of
a negative. The seconds before a recorder's first sample are not in it.

Everything is untrusted: a point outside ENERGY_RANGE is skipped, a total past MAX_JOULES is
unknown, a price must be finite and within [0, bounded.MAX_PRICE]. Nothing here is negative or
infinite; unknown is None with the reason, never a zero.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from distcore import bounded, names
from distcore.jobs.ledger import Ledger, job_ledger
from distcore.jobs.snapshots import Job, JobsSnapshot, Prices
from distcore.snapshot import json_float

JOULES_PER_KWH: Final = 3.6e6
MAX_JOULES: Final = 1e15
"""About 280 GWh: more than any job; a counter claiming more is unknown."""
ENERGY_RANGE: Final = (0.0, MAX_JOULES)
_ENERGY_TAG = re.compile(rf"gpu/\d{{1,4}}/{names.GPU_ENERGY}|{re.escape(names.HOST_ENERGY_JOULES)}")
NO_GPUS: Final = "no GPUs"
NO_SAMPLES: Final = "no system samples"
NO_COUNTER: Final = "no energy counter recorded"
NO_PRICE: Final = "no price: --price-gpu-hour, --price-kwh"


@dataclass(frozen=True)
class JobCost:
    """A job's cost; None wherever unknown, `why` says why per figure (gpu_hours, energy,
    money)."""

    gpus: int | None
    gpu_hours: float | None
    bucket_gpu_hours: Mapping[str, float | None]
    energy_kwh: float | None
    money: float | None
    not_compute: float | None  # the share of the wall that was not compute (1 - goodput)
    why: Mapping[str, str] = field(default_factory=dict)


def cost_of(ledger: Ledger | None, gpus: int | None, joules: float | None, prices: Prices,
            *, energy_why: str = NO_COUNTER) -> JobCost:
    """The cost from a ledger (its wall and buckets), the GPU count (0: a CPU job; None:
    unknown), the energy in joules (None: unknown, `energy_why`) and the prices."""
    why: dict[str, str] = {}
    buckets: dict[str, float | None] = {}
    hours: float | None = None
    wall = ledger.wall_seconds if ledger is not None else None
    if gpus is None or gpus <= 0:
        why["gpu_hours"] = NO_GPUS if gpus == 0 else NO_SAMPLES
    elif wall is None:
        why["gpu_hours"] = "wall time unknown"
    else:
        hours = _hours(wall, gpus)
        buckets = {b: _hours(s, gpus) if s is not None else None
                   for b, s in (ledger.buckets.items() if ledger is not None else ())}
    kwh = bounded.bounded_float(joules, *ENERGY_RANGE)
    kwh = kwh / JOULES_PER_KWH if kwh is not None else None
    if kwh is None:
        why["energy"] = energy_why
    money = _money(hours, kwh, prices, why)
    goodput = ledger.goodput if ledger is not None else None
    return JobCost(gpus, hours, buckets, kwh, money,
                   1.0 - goodput if goodput is not None else None, why)


def _hours(seconds: float, gpus: int) -> float | None:
    value = seconds * gpus / 3600.0
    return value if math.isfinite(value) and value >= 0 else None


def _money(hours: float | None, kwh: float | None, prices: Prices,
           why: dict[str, str]) -> float | None:
    """Every priced quantity's price × amount; unknown when a priced quantity is unknown (a
    part of the bill is no bill) or no price is given."""
    gpu_price, kwh_price = bounded.price(prices.gpu_hour), bounded.price(prices.kwh)
    if gpu_price is None and kwh_price is None:
        why["money"] = NO_PRICE
        return None
    total = 0.0
    for each, amount, what in ((gpu_price, hours, "GPU-hours"), (kwh_price, kwh, "energy")):
        if each is None:
            continue
        if amount is None:
            why["money"] = f"{what} unknown"
            return None
        total += each * amount
    return total if math.isfinite(total) else None


def counter_rise(values: Iterable[float | None]) -> float:
    """The sum of a counter's rises between consecutive readable points (distcore.bounded's
    ENERGY_RANGE), never negative: a fall (a reset) adds nothing."""
    rise, before = 0.0, None
    for raw in values:
        value = bounded.bounded_float(raw, *ENERGY_RANGE)
        if value is None:
            continue
        if before is not None and value > before:
            rise += value - before
        before = value
    return rise


def job_energy(parts: Mapping[str, Any]) -> float | None:
    """Joules over the job's life from every energy counter of its system runs; None when none
    has two points. The decimated points keep a series' extremes, so a reset still shows."""
    total, found = 0.0, False
    for part, run in parts.items():
        if part != names.SYSTEM_DIR and not part.startswith(names.SYSTEM_DIR + "/"):
            continue
        for tag, series in run.scalars.items():
            if _ENERGY_TAG.fullmatch(tag) and series.count >= 2:
                found = True
                total += counter_rise([*series.values, series.last_value])
    if not found or not total <= MAX_JOULES:
        return None
    return total


def job_gpus(job: Job) -> int | None:
    """The GPUs the job's system runs recorded (0: they recorded none; None: no system run)."""
    recorded = [h for h in job.hosts if h.source == "logdir"]
    if not recorded and not _has_system(job.parts):
        return None
    return sum(len(h.gpus) for h in recorded)


def _has_system(parts: Sequence[str] | Mapping[str, Any]) -> bool:
    return any(p == names.SYSTEM_DIR or p.startswith(names.SYSTEM_DIR + "/") for p in parts)


def job_prices(job: Job, given: Prices) -> Prices:
    """distmon's prices, each where given, else the job's own from run.json."""
    own = job.agent.prices if job.agent is not None else Prices()
    return Prices(given.gpu_hour if given.gpu_hour is not None else own.gpu_hour,
                  given.kwh if given.kwh is not None else own.kwh)


def job_cost(job: Job, given: Prices) -> JobCost | None:
    """The job's cost at distmon's prices (else its own), or None for a job with no ledger
    (nothing measured its wall time)."""
    return ledger_cost(job, given, job_ledger(job))


def ledger_cost(job: Job, given: Prices, ledger: Ledger | None) -> JobCost | None:
    """job_cost, with the job's ledger (job_ledger's) already at hand."""
    if ledger is None:
        return None
    return cost_of(ledger, job_gpus(job), job_energy(job.parts), job_prices(job, given))


def snapshot_prices(snap: JobsSnapshot) -> Prices:
    """The prices distmon was given (its flags), carried by the snapshot."""
    return Prices(snap.price_gpu_hour, snap.price_kwh)


def cost_to_json(cost: JobCost | None) -> dict[str, Any] | None:
    """`--once --json`'s `cost` of a job (null: no ledger): every figure null where unknown,
    `why` naming the reason per figure."""
    if cost is None:
        return None
    return {
        "gpus": cost.gpus,
        "gpu_hours": json_float(cost.gpu_hours),
        "gpu_hours_by_bucket": {b: json_float(h) for b, h in cost.bucket_gpu_hours.items()},
        "energy_kwh": json_float(cost.energy_kwh),
        "money": json_float(cost.money),
        "currency": "USD",
        "not_compute": json_float(cost.not_compute),
        "why": dict(cost.why),
    }
