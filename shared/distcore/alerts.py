"""Alert rules: pure functions over the runs and the GPUs, shown by the dashboard and `--once`.

Every rule takes plain facts (the protocols below match distcore.events' RunSnapshot/Series and
distcore.telemetry's GpuDevice) and returns `Alert`s. Nothing here reads files or clocks: `now`
is passed in, so rules are table-tested. Rules that need points look at a series' tail only, and
the job index (distcore.jobs) runs the point rules again only for runs that changed.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from distcore import names
from distcore.smoothing import DEFAULT_WEIGHT, debiased_ema, debiasing_divisors
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
RISING_WARMUP: Final = 40  # points before the window that the EMA starts from
TAIL_POINTS: Final = 64  # points of a series' tail the cadence and "since" look at
BURST_GAP_SECONDS: Final = 0.5  # points closer than this were logged in one burst
SPIKE_FACTOR: Final = 10.0  # a gradient norm this many times its recent median is a spike
SPIKE_WINDOW: Final = 20  # points before a gradient norm that make its recent median
SPIKE_MIN_POINTS: Final = 5  # fewer points before it: no median to speak of
REMEDY: Final = (
    "use parallel map (num_parallel_calls=AUTOTUNE), prefetch, and cache the dataset if it fits"
)


class SeriesLike(Protocol):
    @property
    def steps(self) -> Sequence[int]: ...
    @property
    def values(self) -> Sequence[float]: ...
    @property
    def wall_times(self) -> Sequence[float]: ...
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


AlertKey = tuple[str, str | None, str | None, int | None]


@dataclass(frozen=True)
class Alert:
    kind: str
    severity: Severity
    run: str | None
    message: str
    since: float | None
    # What a run-less alert is about (a GPU rule's host, and its GPU where it names one): two
    # hosts' gpu_imbalance are two alerts, each with its own since, series and notification.
    host: str | None = None
    gpu: int | None = None

    @property
    def key(self) -> AlertKey:
        """Its identity while it persists: kind, run, host and GPU (never the message, whose
        figures change every refresh)."""
        return (self.kind, self.run, self.host, self.gpu)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "run": self.run,
            "host": self.host,
            "gpu": self.gpu,
            "message": self.message,
            "since": self.since,
        }


def input_stall_severity(fraction: float) -> Severity | None:
    """The TF profiler's bands: under 5% fine, 5-20% moderately, 20% or more highly input-bound."""
    if not math.isfinite(fraction) or fraction < names.INPUT_WAIT_MODERATE:
        return None
    return "critical" if fraction >= names.INPUT_WAIT_HIGH else "warning"


def _tail(values: Sequence[Any], n: int) -> Sequence[Any]:
    """The newest n items: rules look at a series' tail only, so their cost does not grow with
    the points kept (2,000 per series by default)."""
    return values[-n:] if len(values) > n else values


def _floats(values: Sequence[Any], n: int) -> list[Any]:
    """The newest n items as a list of Python numbers, the items `_tail` holds: a store's
    Column converts in one call (reading it item by item was most of the rules' time on a
    sweep of 10,000 small runs)."""
    tail = _tail(values, n)
    tolist = getattr(tail, "tolist", None)
    return tolist() if tolist is not None else list(tail)


_LOSS_TAGS: dict[tuple[str, ...], str | None] = {}
_LOSS_TAGS_KEPT: Final = 4096


def loss_tag(scalars: Mapping[str, Any]) -> str | None:
    """`pick_tag(scalars, "loss")`, remembered per set of tags: a sweep's runs share theirs,
    and three rules ask it of every run."""
    key = tuple(scalars)
    found = _LOSS_TAGS.get(key, "")
    if found != "":
        return found
    if len(_LOSS_TAGS) >= _LOSS_TAGS_KEPT:
        _LOSS_TAGS.clear()
    found = _LOSS_TAGS[key] = pick_tag(key, "loss")
    return found


def _trailing_since(series: SeriesLike, holds: Any) -> float:
    """Wall time of the first point of the newest unbroken stretch where `holds(value)`, looked
    for in the tail (an older start is kept by `keep_since` while the alert persists)."""
    since = series.last_wall_time
    values, walls = _floats(series.values, TAIL_POINTS), _floats(series.wall_times, TAIL_POINTS)
    for value, wall in zip(reversed(values), reversed(walls), strict=False):
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
    tag = loss_tag(run.scalars)
    if tag is None:
        return None
    series = run.scalars[tag]
    if math.isfinite(series.last_value):
        return None
    since = _trailing_since(series, lambda v: not math.isfinite(v))
    step = f" at step {series.steps[-1]}" if series.steps else ""
    message = f"{tag} is {series.last_value}{step} — training diverged (lower the learning rate?)"
    return Alert("loss_nan", "critical", run.name, message, since)


EMA_WEIGHT: Final = DEFAULT_WEIGHT
EMA_DIVISORS: Final = debiasing_divisors(EMA_WEIGHT, RISING_WINDOW + RISING_WARMUP)


def loss_rising(run: RunLike) -> Alert | None:
    """A smoothed loss that climbs steadily over its last RISING_WINDOW points.

    The EMA starts RISING_WARMUP points before the window: with the default weight 0.6 the
    start's influence is 0.6**40 ≈ 1e-9 by the window, so the tail gives the whole curve's
    smoothed values at a fixed cost."""
    tag = loss_tag(run.scalars)
    if tag is None:
        return None
    series = run.scalars[tag]
    values = _floats(series.values, RISING_WINDOW + RISING_WARMUP)
    if len(values) < RISING_WINDOW or not all(map(math.isfinite, values)):
        return None
    window = debiased_ema(values, EMA_WEIGHT)[-RISING_WINDOW:]
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


def gradient_spike(run: RunLike) -> Alert | None:
    """The newest gradient norm in the tail above SPIKE_FACTOR × the median of the SPIKE_WINDOW
    points before it: a warning that often comes before a NaN (clip, or lower the rate)."""
    series = run.scalars.get(names.GRAD_NORM)
    if series is None:
        return None
    values = list(_tail(series.values, TAIL_POINTS + SPIKE_WINDOW))
    walls, steps = _tail(series.wall_times, len(values)), _tail(series.steps, len(values))
    for i in range(len(values) - 1, max(SPIKE_MIN_POINTS, len(values) - TAIL_POINTS) - 1, -1):
        before = [v for v in values[max(0, i - SPIKE_WINDOW):i] if math.isfinite(v)]
        if len(before) < SPIKE_MIN_POINTS:
            continue
        median = statistics.median(before)
        value = values[i]
        if median > 0 and math.isfinite(value) and value > SPIKE_FACTOR * median:
            message = (f"gradient spike: {names.GRAD_NORM} {value:.4g} at step {steps[i]} is "
                       f"{value / median:.0f}× its recent median {median:.4g} (divergence ahead? "
                       "set optimizer.clip_norm or lower the learning rate)")
            return Alert("gradient_spike", "warning", run.name, message, walls[i])
    return None


def recovered(job: str, recoveries: Iterable[Any], since: float | None) -> list[Alert]:
    """One warning per rollback distagent made (run.json's `recoveries`, as RecoveryNote)."""
    found = []
    for note in recoveries:
        rates = ""
        if note.lr_before is not None and note.lr_after is not None:
            rates = f" (lr {note.lr_before:.4g} → {note.lr_after:.4g})"
        back = f", rolled back to step {note.restored_step}" \
            if note.restored_step is not None else ""
        message = f"recovered from divergence at step {note.step}{rates}{back}"
        found.append(Alert("recovered", "warning", job, message, since))
    return found


def series_alerts(run: RunLike) -> list[Alert]:
    """The rules that depend only on a run's points: computed again only when the run changed."""
    found = [input_stall(run), loss_nan(run), loss_rising(run), gradient_spike(run)]
    return [a for a in found if a is not None]


def usual_interval(run: RunLike) -> float | None:
    """The run's cadence in seconds: how often its densest series gets a point, or None when
    that is not meaningful (fewer than 3 points, or everything written within STALL_MIN_SECONDS:
    a burst writer that logged its whole history at once has no cadence to fall behind).

    It is the median gap between the tail's points; a writer that logs in bursts (many points at
    almost the same time, then a pause) has a median gap near zero, so there the cadence is the
    median of the pauses between bursts."""
    best = densest_series(run)
    return None if best is None else series_cadence(best)


def densest_series(run: RunLike) -> SeriesLike | None:
    """The series usual_interval reads, or None when the run has no cadence to speak of."""
    best = max(run.scalars.values(), key=lambda s: s.count, default=None)
    if best is None or best.count < 3 or len(best.wall_times) < 3:
        return None
    if best.last_wall_time - best.wall_times[0] < STALL_MIN_SECONDS:
        return None
    return best


def series_cadence(best: SeriesLike) -> float | None:
    walls = _floats(best.wall_times, TAIL_POINTS)
    gaps = [b - a for a, b in itertools.pairwise(walls) if math.isfinite(b - a) and b >= a]
    if not gaps:
        return None
    typical = statistics.median(gaps)
    if typical >= BURST_GAP_SECONDS:
        return typical
    pauses = [g for g in gaps if g >= BURST_GAP_SECONDS]
    return statistics.median(pauses) if len(pauses) >= 2 else typical or None


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.2g} s"


def run_stalled(
    run: RunLike, now: float, agent_status: str | None = None, interval: float | None = None
) -> Alert | None:
    """Points stopped arriving: a gap far longer than usual, on a run that should be writing.
    `interval`: the run's cadence when the caller cached it (usual_interval otherwise)."""
    if run.status == "gone" or run.last_update is None:
        return None
    if agent_status is not None and agent_status != names.STATUS_RUNNING:
        return None  # ended jobs never stall
    interval = usual_interval(run) if interval is None else interval
    if interval is None:
        return None
    gap = now - run.last_update
    limit = max(STALL_FACTOR * interval, STALL_MIN_SECONDS)
    if gap <= limit or (agent_status is None and gap > STALL_HORIZON_SECONDS):
        return None
    message = f"no new points for {gap:.0f} s (usually every {_seconds(interval)}) — stalled?"
    return Alert("run_stalled", "warning", run.name, message, run.last_update)


def _is_advancing(run: RunLike, now: float, interval: float | None) -> bool:
    """Points still arriving at about the usual pace."""
    if interval is None or run.last_update is None or run.status == "gone":
        return False
    return now - run.last_update <= max(STALL_FACTOR * interval, STALL_MIN_SECONDS)


def input_bound_suspected(
    runs: Sequence[RunLike],
    gpus: Sequence[GpuLike],
    now: float,
    intervals: Mapping[str, float | None] | None = None,
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
    cadence = intervals if intervals is not None else {r.name: usual_interval(r) for r in runs}
    return [
        Alert("input_bound_suspected", "warning", run.name, message, now)
        for run in runs
        if names.INPUT_WAIT_FRACTION not in run.scalars
        and loss_tag(run.scalars) is not None
        and _is_advancing(run, now, cadence.get(run.name))
    ]


def gpu_imbalance(
    gpus: Sequence[GpuLike], now: float, where: str = "", host: str | None = None
) -> Alert | None:
    """`where`: the host's name for GPUs other than this machine's (" on gpu7"); `host`: the
    host the alert is about (its key)."""
    utils = {g.index: g.utilization_gpu for g in gpus if g.utilization_gpu is not None}
    if len(utils) < 2:
        return None
    spread = max(utils.values()) - min(utils.values())
    if spread <= IMBALANCE_SPREAD:
        return None
    busiest = max(utils, key=lambda i: utils[i])
    idlest = min(utils, key=lambda i: utils[i])
    message = (
        f"GPUs{where} unevenly used: GPU {busiest} at {utils[busiest]:.0f}%, "
        f"GPU {idlest} at {utils[idlest]:.0f}% (spread {spread:.0f} points)"
    )
    return Alert("gpu_imbalance", "warning", None, message, now, host=host)


def gpu_memory_full(
    gpu: GpuLike, now: float, where: str = "", host: str | None = None
) -> Alert | None:
    used, total = gpu.memory_used_mib, gpu.memory_total_mib
    if used is None or not total:
        return None
    fraction = used / total
    if fraction < MEMORY_FULL_FRACTION:
        return None
    gib = f"{used / 1024:.1f}/{total / 1024:.1f} GiB"
    message = f"GPU {gpu.index}{where} memory {fraction:.0%} full ({gib})"
    return Alert("gpu_memory_full", "warning", None, message, now, host=host, gpu=gpu.index)


def gpu_alerts(
    gpus: Sequence[GpuLike], now: float, where: str = "", host: str | None = None
) -> list[Alert]:
    found = [gpu_imbalance(gpus, now, where, host),
             *(gpu_memory_full(g, now, where, host) for g in gpus)]  # fmt: skip
    return [a for a in found if a is not None]


def agent_outcome(
    job: str, status: str | None, step: int | None, error: str | None, since: float | None
) -> Alert | None:
    """What distagent's run.json says happened: diverged and failed are critical (naming the
    step and the error), stopped is information; running and finished raise nothing."""
    at = f" at step {step}" if step is not None else ""
    why = f": {error}" if error else ""
    if status == names.STATUS_DIVERGED:
        return Alert("job_diverged", "critical", job, f"training diverged{at}{why}", since)
    if status == names.STATUS_FAILED:
        return Alert("job_failed", "critical", job, f"job failed{at}{why}", since)
    if status == names.STATUS_STOPPED:
        return Alert("job_stopped", "info", job, f"stopped{at}{why}", since)
    return None


def agent_died(job: str, agent_status: str | None, job_id: str, state: str, ended: bool,
               since: float | None) -> Alert | None:
    """The scheduler ended the job while run.json still says running: the agent was killed
    without a chance to write its end (SIGKILL, out of memory, a node that failed, a time limit
    without a signal before it)."""
    if agent_status != names.STATUS_RUNNING or not ended:
        return None
    return Alert("agent_died", "critical", job,
                 f"Slurm job {job_id} is {state} but run.json still says running: the agent died "
                 "without a word (killed, out of memory, or its node failed); see the job's "
                 "output file", since)


def agent_step_gone(job: str, job_id: str, step_id: str, since: float | None) -> Alert:
    """The job still runs but the job step that ran distagent has ended, while run.json still
    says running (distcore.jobs.scheduler.step_gone decides it from squeue's listing)."""
    return Alert("agent_died", "critical", job,
                 f"Slurm job {job_id} is RUNNING but its step {step_id}, which ran distagent, "
                 "has ended while run.json still says running: the agent died without a word "
                 "(killed, out of memory); see the job's output file", since)


def sort_alerts(alerts: Iterable[Alert]) -> tuple[Alert, ...]:
    """Most severe first, then by run, kind, host and GPU: a stable order for screens and JSON."""
    return tuple(sorted(alerts, key=lambda a: (SEVERITY_ORDER[a.severity], a.run or "", a.kind,
                                               a.host or "", -1 if a.gpu is None else a.gpu)))


def keep_since(previous: Iterable[Alert], current: Iterable[Alert]) -> tuple[Alert, ...]:
    """An alert that persists keeps the `since` it was first raised with."""
    first = {a.key: a.since for a in previous}
    return tuple(dataclasses.replace(a, since=first.get(a.key, a.since)) for a in current)
