"""Alert rules: pure functions over the runs and the GPUs, shown by the dashboard and `--once`.

Every rule takes plain facts (the protocols below match distcore.events' RunSnapshot/Series and
distcore.telemetry's GpuDevice, and the small classes built from `--once` JSON) and returns
`Alert`s. Nothing here reads files or clocks: `now` is passed in, so rules are table-tested.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from distcore import names
from distcore.smoothing import debiased_ema
from distcore.tags import pick_tag

Severity = Literal["info", "warning", "critical"]
SEVERITY_ORDER: Final = {"critical": 0, "warning": 1, "info": 2}

# Thresholds beyond the TF profiler's bands (those live in distcore.names).
LOW_GPU_UTILIZATION: Final = 30.0  # % below which a busy job's GPUs look starved
IMBALANCE_SPREAD: Final = 30.0  # max - min utilization (points of %) across a job's GPUs
MEMORY_FULL_FRACTION: Final = 0.95
STALL_FACTOR: Final = 10.0  # a gap this many times the usual interval is a stall
STALL_MIN_SECONDS: Final = 30.0
STALL_HORIZON_SECONDS: Final = 600.0  # beyond this a silent run is just old (idle), not stalled
RISING_WINDOW: Final = 20  # points of loss looked at for divergence
RISING_FRACTION: Final = 0.10  # smoothed loss above its window minimum by this much
RISING_STEADY: Final = 0.7  # share of the smoothed steps that go up
REMEDY: Final = (
    "use parallel map (num_parallel_calls=AUTOTUNE), prefetch, and cache the dataset if it fits"
)


class SeriesLike(Protocol):
    @property
    def steps(self) -> tuple[int, ...]: ...
    @property
    def values(self) -> tuple[float, ...]: ...
    @property
    def wall_times(self) -> tuple[float, ...]: ...
    @property
    def last_value(self) -> float: ...
    @property
    def last_wall_time(self) -> float: ...
    @property
    def count(self) -> int: ...


class RunLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def scalars(self) -> Mapping[str, SeriesLike]: ...
    @property
    def last_update(self) -> float | None: ...


class GpuLike(Protocol):
    @property
    def index(self) -> int: ...
    @property
    def utilization_gpu(self) -> float | None: ...
    @property
    def memory_used_mib(self) -> float | None: ...
    @property
    def memory_total_mib(self) -> float | None: ...


@dataclass(frozen=True)
class Alert:
    kind: str
    severity: Severity
    run: str | None
    message: str
    since: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "run": self.run,
            "message": self.message,
            "since": self.since,
        }


def input_stall_severity(fraction: float) -> Severity | None:
    """The TF profiler's bands: under 5% fine, 5-20% moderately, 20% or more highly input-bound."""
    if not math.isfinite(fraction) or fraction < names.INPUT_WAIT_MODERATE:
        return None
    return "critical" if fraction >= names.INPUT_WAIT_HIGH else "warning"


def _trailing_since(series: SeriesLike, holds: Any) -> float:
    """Wall time of the first point of the newest unbroken stretch where `holds(value)`."""
    since = series.last_wall_time
    for value, wall in zip(reversed(series.values), reversed(series.wall_times), strict=False):
        if not holds(value):
            break
        since = wall
    return since


def input_stall(run: RunLike) -> Alert | None:
    series = run.scalars.get(names.INPUT_WAIT_FRACTION)
    if series is None:
        return None
    severity = input_stall_severity(series.last_value)
    if severity is None:
        return None
    level = "highly" if severity == "critical" else "moderately"
    message = (
        f"Your program is {level} input-bound: {series.last_value:.0%} of the step time is spent "
        f"waiting for input. Recommendation: {REMEDY}."
    )
    since = _trailing_since(series, lambda v: input_stall_severity(v) is not None)
    return Alert("input_stall", severity, run.name, message, since)


def loss_nan(run: RunLike) -> Alert | None:
    tag = pick_tag(run.scalars, "loss")
    if tag is None:
        return None
    series = run.scalars[tag]
    if math.isfinite(series.last_value):
        return None
    since = _trailing_since(series, lambda v: not math.isfinite(v))
    message = f"{tag} is {series.last_value} — training diverged (lower the learning rate?)"
    return Alert("loss_nan", "critical", run.name, message, since)


def loss_rising(run: RunLike) -> Alert | None:
    """A smoothed loss that climbs steadily over its last RISING_WINDOW points."""
    tag = pick_tag(run.scalars, "loss")
    if tag is None:
        return None
    series = run.scalars[tag]
    if len(series.values) < RISING_WINDOW or not all(map(math.isfinite, series.values)):
        return None
    window = debiased_ema(series.values)[-RISING_WINDOW:]
    low = min(window)
    low_at = window.index(low)
    rise = window[-1] - low
    ups = sum(b > a for a, b in itertools.pairwise(window))
    if rise <= RISING_FRACTION * max(abs(low), 1e-12) or ups < RISING_STEADY * (len(window) - 1):
        return None
    since = series.wall_times[len(series.wall_times) - RISING_WINDOW + low_at]
    message = (
        f"{tag} rising steadily: {low:.4g} -> {window[-1]:.4g} over the last {RISING_WINDOW} "
        "points (divergence? check the learning rate)"
    )
    return Alert("loss_rising", "warning", run.name, message, since)


def usual_interval(run: RunLike) -> float | None:
    """Mean seconds between points of the run's densest series (robust to decimation)."""
    best = max(run.scalars.values(), key=lambda s: s.count, default=None)
    if best is None or best.count < 3 or not best.wall_times:
        return None
    span = best.last_wall_time - best.wall_times[0]
    return span / (best.count - 1) if span > 0 else None


def run_stalled(run: RunLike, now: float, agent_status: str | None = None) -> Alert | None:
    """Points stopped arriving: a gap far longer than usual, on a run that should be writing."""
    if run.status == "gone" or run.last_update is None:
        return None
    if agent_status is not None and agent_status != names.STATUS_RUNNING:
        return None
    interval = usual_interval(run)
    if interval is None:
        return None
    gap = now - run.last_update
    limit = max(STALL_FACTOR * interval, STALL_MIN_SECONDS)
    if gap <= limit or (agent_status is None and gap > STALL_HORIZON_SECONDS):
        return None
    message = f"no new points for {gap:.0f} s (usually every {interval:.1f} s) — stalled?"
    return Alert("run_stalled", "warning", run.name, message, run.last_update)


def _is_advancing(run: RunLike, now: float) -> bool:
    """Points still arriving at about the usual pace."""
    interval = usual_interval(run)
    if interval is None or run.last_update is None or run.status == "gone":
        return False
    return now - run.last_update <= max(STALL_FACTOR * interval, STALL_MIN_SECONDS)


def input_bound_suspected(
    runs: Sequence[RunLike], gpus: Sequence[GpuLike], now: float
) -> list[Alert]:
    """For writers that do not measure input wait: idle GPUs while a run's steps advance."""
    utils = [g.utilization_gpu for g in gpus if g.utilization_gpu is not None]
    if not utils:
        return []
    mean = statistics.fmean(utils)
    if mean >= LOW_GPU_UTILIZATION:
        return []
    message = (
        f"GPU utilization {mean:.0f}% while steps advance: input-bound suspected. "
        f"Recommendation: {REMEDY}."
    )
    return [
        Alert("input_bound_suspected", "warning", run.name, message, now)
        for run in runs
        if names.INPUT_WAIT_FRACTION not in run.scalars
        and pick_tag(run.scalars, "loss") is not None
        and _is_advancing(run, now)
    ]


def gpu_imbalance(gpus: Sequence[GpuLike], now: float) -> Alert | None:
    utils = {g.index: g.utilization_gpu for g in gpus if g.utilization_gpu is not None}
    if len(utils) < 2:
        return None
    spread = max(utils.values()) - min(utils.values())
    if spread <= IMBALANCE_SPREAD:
        return None
    busiest = max(utils, key=lambda i: utils[i])
    idlest = min(utils, key=lambda i: utils[i])
    message = (
        f"GPUs unevenly used: GPU {busiest} at {utils[busiest]:.0f}%, "
        f"GPU {idlest} at {utils[idlest]:.0f}% (spread {spread:.0f} points)"
    )
    return Alert("gpu_imbalance", "warning", None, message, now)


def gpu_memory_full(gpu: GpuLike, now: float) -> Alert | None:
    used, total = gpu.memory_used_mib, gpu.memory_total_mib
    if used is None or not total:
        return None
    fraction = used / total
    if fraction < MEMORY_FULL_FRACTION:
        return None
    gib = f"{used / 1024:.1f}/{total / 1024:.1f} GiB"
    message = f"GPU {gpu.index} memory {fraction:.0%} full ({gib})"
    return Alert("gpu_memory_full", "warning", None, message, now)


def evaluate(
    runs: Sequence[RunLike],
    gpus: Sequence[GpuLike],
    *,
    now: float,
    agent_status: Mapping[str, str] | None = None,
) -> tuple[Alert, ...]:
    """Every alert, most severe first. `agent_status`: run name -> run.json status (distagent)."""
    statuses = agent_status or {}
    found: list[Alert | None] = []
    for run in runs:
        status = statuses.get(run.name)
        found += [input_stall(run), loss_nan(run), loss_rising(run), run_stalled(run, now, status)]
    found += input_bound_suspected(runs, gpus, now)
    found.append(gpu_imbalance(gpus, now))
    found += [gpu_memory_full(g, now) for g in gpus]
    alerts = [a for a in found if a is not None]
    return tuple(sorted(alerts, key=lambda a: (SEVERITY_ORDER[a.severity], a.run or "", a.kind)))


def keep_since(previous: Iterable[Alert], current: Iterable[Alert]) -> tuple[Alert, ...]:
    """An alert that persists keeps the `since` it was first raised with."""
    first = {(a.kind, a.run): a.since for a in previous}
    out = []
    for alert in current:
        since = first.get((alert.kind, alert.run), alert.since)
        out.append(Alert(alert.kind, alert.severity, alert.run, alert.message, since))
    return tuple(out)


# --- `distmon --once --json` hands the rules JSON dicts: small adapters to the protocols above.


@dataclass(frozen=True)
class JsonSeries:
    """A series known only by its summary (the JSON has no points): rules needing points skip it."""

    steps: tuple[int, ...]
    values: tuple[float, ...]
    wall_times: tuple[float, ...]
    last_value: float
    last_wall_time: float
    count: int


@dataclass(frozen=True)
class JsonRun:
    name: str
    status: str
    scalars: Mapping[str, JsonSeries]
    last_update: float | None


@dataclass(frozen=True)
class JsonGpu:
    index: int
    utilization_gpu: float | None
    memory_used_mib: float | None
    memory_total_mib: float | None


def _number(value: Any) -> float:
    return float(value)  # float("nan") / float("inf") read back the strings json_float wrote


def run_from_json(doc: Mapping[str, Any]) -> JsonRun:
    scalars = {}
    for tag, s in doc.get("scalars", {}).items():
        value, wall = _number(s["last_value"]), _number(s["last_wall_time"])
        scalars[tag] = JsonSeries(
            (int(s["last_step"]),), (value,), (wall,), value, wall, int(s["count"])
        )
    walls = [s.last_wall_time for s in scalars.values()]
    return JsonRun(
        str(doc["name"]), str(doc.get("status", "idle")), scalars, max(walls) if walls else None
    )


def gpu_from_json(doc: Mapping[str, Any]) -> JsonGpu:
    def opt(key: str) -> float | None:
        value = doc.get(key)
        return None if value is None else float(value)

    return JsonGpu(
        int(doc["index"]), opt("utilization_gpu"), opt("memory_used_mib"), opt("memory_total_mib")
    )
