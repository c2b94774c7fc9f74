"""Where a job's wall time went: its ledger of seconds per bucket, as distmon reads it.

distagent keeps the ledger (distagent.train.ledger) and writes it twice: into run.json
(`ledger`: {bucket: seconds}, `goodput`, `ledger_wall`, `ledger_time`) and as TensorBoard scalars
`time/<bucket>` at every log point. A job's ledger spans all of its attempts (a kill -9 and
resume, a rollback, a requeue); goodput is compute over the whole wall time.

`job_ledger` takes the best source a job has: run.json, else the `time/` scalars its events
hold (a remote logdir whose run.json was not read), else only what any event files prove: the
span of the points and the gaps between them that no step cadence explains (a resumed run, a
stall). A bucket nobody measured is None (shown as `–`), never a zero.

run.json and the scalars are untrusted: a bucket or a wall of the wrong type, negative, non-finite
or longer than any job (distcore.bounded.seconds) is unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from distcore import bounded, names

if TYPE_CHECKING:
    from distcore.events.snapshots import RunSnapshot

BUCKETS: Final = (
    "startup", "compute", "input_wait", "checkpoint", "restore", "evaluation", "recovery",
    "lost", "scheduler", "teardown", "unknown",
)  # fmt: skip
"""Every bucket, in the order the ledger shows them; together they make the wall time."""
TIME_PREFIX: Final = "time/"
"""The scalars' prefix: `time/compute`, `time/lost`, ..."""
# A gap between two points counts (events only) when it is this many times the run's median
# interval between points, and at least GAP_MIN_SECONDS: a log interval's jitter is not a gap.
GAP_FACTOR: Final = 10.0
GAP_MIN_SECONDS: Final = 30.0

LedgerSource = Literal["agent", "scalars", "events"]


class Job(Protocol):
    """What a job's ledger is read from: distcore.jobs.snapshots.Job (which holds a Ledger, so
    this module cannot import it)."""

    @property
    def agent(self) -> Any: ...
    @property
    def parts(self) -> Mapping[str, RunSnapshot]: ...


@dataclass(frozen=True)
class Ledger:
    """A job's seconds per bucket (None: not known) and where they come from."""

    source: LedgerSource
    buckets: Mapping[str, float | None]
    wall_seconds: float | None
    gaps: int = 0  # events only: the stretches between points that no cadence explains
    gap_seconds: float = 0.0
    measured_at: float | None = None  # wall time the ledger was last written (run.json)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def goodput(self) -> float | None:
        """compute / wall, where both are known and the wall is not zero."""
        compute = self.buckets.get("compute")
        if compute is None or not self.wall_seconds:
            return None
        return min(1.0, max(0.0, compute / self.wall_seconds))

    def share(self, bucket: str) -> float | None:
        seconds = self.buckets.get(bucket)
        if seconds is None or not self.wall_seconds:
            return None
        return seconds / self.wall_seconds


def ledger_from_record(doc: Mapping[str, Any]) -> Ledger | None:
    """run.json's `ledger`, `ledger_wall` and `ledger_time`, or None when it has no readable
    bucket. The wall is `ledger_wall`, else the buckets' sum when every one is known."""
    raw = doc.get("ledger")
    if not isinstance(raw, dict):
        return None
    buckets = {b: bounded.seconds(raw.get(b)) for b in BUCKETS}
    if all(v is None for v in buckets.values()):
        return None
    wall = bounded.seconds(doc.get("ledger_wall"))
    if wall is None and all(v is not None for v in buckets.values()):
        wall = sum(v for v in buckets.values() if v is not None)
    return Ledger("agent", buckets, wall, measured_at=bounded.timestamp(doc.get("ledger_time")))


def ledger_from_scalars(last_values: Mapping[str, float]) -> Ledger | None:
    """The `time/<bucket>` scalars' last values (one part's), or None when there are none."""
    buckets = {b: bounded.seconds(last_values.get(TIME_PREFIX + b)) for b in BUCKETS}
    if all(v is None for v in buckets.values()):
        return None
    known = [v for v in buckets.values() if v is not None]
    return Ledger("scalars", buckets, sum(known) if len(known) == len(BUCKETS) else None)


def gaps_between(wall_times: Sequence[float] | Any) -> tuple[int, float]:
    """Stretches between consecutive points far longer than the run's usual interval (GAP_FACTOR
    times the median, at least GAP_MIN_SECONDS): how many, and their seconds beyond that median."""
    import numpy as np  # only with a logdir's points: the model stays light

    times = _clock_times(wall_times)
    intervals = np.diff(times)
    intervals = intervals[intervals >= 0]
    if len(intervals) < 2:
        return 0, 0.0
    median = _median(intervals)
    long = intervals[intervals > max(GAP_FACTOR * median, GAP_MIN_SECONDS)] - median
    return len(long), float(long.sum())


def _median(values: Any) -> float:
    """numpy.median of a float array without NaN, by one partition: numpy.median's own checks
    and dispatch cost more than the partition of a run's few hundred intervals."""
    import numpy as np

    middle = len(values) // 2
    if len(values) % 2:
        return float(np.partition(values, middle)[middle])
    low, high = np.partition(values, (middle - 1, middle))[middle - 1 : middle + 1]
    return float((low + high) / 2)


def _clock_times(wall_times: Sequence[float] | Any) -> Any:
    """The points' wall times that a clock could have given (distcore.bounded.timestamp's
    range): an event file may hold any float, and one of 1e300 would make a wall of it."""
    import numpy as np

    times = np.asarray(wall_times, dtype=np.float64)
    return times[(times >= 0) & (times <= bounded.MAX_TIMESTAMP)]


def ledger_from_events(wall_times: Sequence[float]) -> Ledger | None:
    """What points alone prove: the wall time they span and the gaps in it; every bucket
    unknown. None with fewer than two points."""
    times = _clock_times(wall_times)
    if len(times) < 2:
        return None
    gaps, gap_seconds = gaps_between(times)
    return Ledger("events", dict.fromkeys(BUCKETS), float(times.max() - times.min()),
                  gaps=gaps, gap_seconds=gap_seconds)


def job_ledger(job: Job) -> Ledger | None:
    """The job's ledger from the best source it has (see the module's docstring)."""
    if job.agent is not None and job.agent.ledger is not None:
        return job.agent.ledger
    main = _main_part(job)
    if main is None:
        return None
    timed = {t: s.last_value for t, s in main.scalars.items() if t.startswith(TIME_PREFIX)}
    from_scalars = ledger_from_scalars(timed) if timed else None
    if from_scalars is not None:
        return from_scalars
    longest = max(main.scalars.values(), key=lambda s: len(s.wall_times), default=None)
    return ledger_from_events(longest.wall_times) if longest is not None else None


def job_goodput(job: Job) -> float | None:
    """The goodput column: from run.json or the `time/` scalars only (cheap, no point read)."""
    if job.agent is not None and job.agent.ledger is not None:
        return job.agent.ledger.goodput
    main = _main_part(job)
    if main is None:
        return None
    timed = {t: s.last_value for t, s in main.scalars.items() if t.startswith(TIME_PREFIX)}
    found = ledger_from_scalars(timed) if timed else None
    return found.goodput if found is not None else None


def _main_part(job: Job) -> RunSnapshot | None:
    """train, else the first part that is not a system one (distcore.jobs.parts' rule; not
    imported: the parts know the snapshots, which know this module)."""
    parts = job.parts
    if names.TRAIN_DIR in parts:
        return parts[names.TRAIN_DIR]
    system = names.SYSTEM_DIR
    return next((r for p, r in parts.items() if p != system and not p.startswith(system + "/")),
                None)
