"""A JobsSnapshot as Prometheus metric families: what `distmon --serve --metrics` exposes.

Pure: a snapshot in, `prometheus_client` metric families out (no threads, no clock, no I/O);
`SnapshotCollector` renders the latest snapshot at scrape time; the host and GPU families are
distcore.metrics_hosts'. Names follow Prometheus'
conventions: base units in the name (`_seconds`, `_bytes`, `_celsius`, `_watts`, `_hertz`),
fractions as `_ratio` in [0, 1], timestamps as `_timestamp_seconds`, unknown values absent
(never a zero that reads like an idle GPU).

Label values come from logdirs and event files, so they are untrusted: every one goes through
`label_text`, which writes control characters (C0, DEL, C1: a NUL, CR or ESC would reach
whatever reads the scrape) and lone surrogates as visible escapes, undecodable bytes in
distcore's one form (`\\xNN`), and the backslash as `\\\\` so that distinct names stay
distinct (distcore.textsafe.escaped_text); values are then elided to `LABEL_LIMIT` characters.
prometheus_client escapes quotes and backslashes once more for the exposition. Two values
equal once elided keep the first series only. A label with no value (a host of no job) is left
out of its series, never sent empty. The number of series is bounded (`max_series`, with
`distmon_series_dropped` counted in): families are filled in a fixed order of importance (the
snapshot, jobs, alerts, hosts, GPUs, errors, ledgers, profiles, then scalars) and what does
not fit is counted in `distmon_series_dropped`, never sent. `distmon_job_info` joins each job
to its scheduler.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import get_args

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    StateSetMetricFamily,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from distcore import __version__, names
from distcore.alerts.efficiency import job_mfu
from distcore.bounded import PERF_RANGES, perf_value
from distcore.jobs.cost import JOULES_PER_KWH, job_cost, snapshot_prices
from distcore.jobs.ledger import job_ledger
from distcore.jobs.snapshots import Job, JobsSnapshot, JobStatus
from distcore.metrics_hosts import add_gpus, add_hosts
from distcore.profile import ProfileSummary
from distcore.textsafe import elide, escaped_text

LABEL_LIMIT = 256  # characters of one label value; Prometheus keeps every byte of every one
DEFAULT_MAX_SERIES = 10_000
JOB_STATES: tuple[str, ...] = get_args(JobStatus)
INFO_LABELS = ("job", "scheduler", "slurm_job_id", "partition", "state", "pod")
# run.json's statuses that end a job: its end time is run.json's `end_time` (else its newest point).
ENDED_STATUSES = frozenset({names.STATUS_FINISHED, names.STATUS_FAILED, names.STATUS_DIVERGED,
                            names.STATUS_STOPPED, names.STATUS_HUNG,
                            names.STATUS_DIED})  # fmt: skip


@functools.lru_cache(maxsize=1 << 16)  # the same names recur in every family, every scrape
def label_text(value: object) -> str:
    """An outside string as a label value: no control character, valid UTF-8 (undecodable
    bytes as `\\xNN`), distinct for distinct names until elided to `LABEL_LIMIT`."""
    return elide(escaped_text(str(value)), LABEL_LIMIT)


class _Budget:
    """The series still allowed in this scrape, and every series refused (over the cap, or a
    duplicate once the labels were made safe). `distmon_series_dropped` itself is one of the
    `limit`: it is always sent, so the others get one fewer."""

    def __init__(self, limit: int) -> None:
        self.limit, self.left, self.dropped = limit, max(limit - 1, 0), 0

    def take(self, n: int = 1) -> bool:
        if n > self.left:
            self.dropped += n
            return False
        self.left -= n
        return True


class _Family:
    """One gauge family whose series are bounded by the budget and unique by label values. An
    unknown label (None or empty: a host of no job, an alert of no GPU) is left out of its
    series, never sent empty."""

    def __init__(self, budget: _Budget, name: str, doc: str, labels: Sequence[str]) -> None:
        self.metric = GaugeMetricFamily(name, doc, labels=list(labels))
        self._budget, self._names = budget, tuple(labels)
        self._seen: set[tuple[str, ...]] = set()

    def add(self, labels: Sequence[object], value: float | None) -> None:
        if value is None:  # unknown: absent, never zero
            return
        key = tuple("" if v is None else label_text(v) for v in labels)
        if key in self._seen:
            self._budget.dropped += 1
            return
        if self._budget.take():
            self._seen.add(key)
            known = {n: v for n, v in zip(self._names, key, strict=True) if v}
            self.metric.samples.append(Sample(self.metric.name, known, float(value)))


class _Families:
    """Builds every family of one snapshot, in the order the budget serves them."""

    def __init__(
        self, snap: JobsSnapshot, max_series: int, notify: Mapping[str, int] | None = None
    ) -> None:
        self.snap, self.budget, self.notify = snap, _Budget(max_series), notify
        self.out: list[Metric] = []
        # An alert names a run ("job/train") or a job: both lead to the job's name.
        self.job_of: dict[str, str] = {}
        for job in snap.jobs:
            self.job_of[job.name] = job.name
            for run in job.parts.values():
                self.job_of.setdefault(run.name, job.name)

    def family(self, name: str, doc: str, labels: Sequence[str] = ()) -> _Family:
        made = _Family(self.budget, name, doc, labels)
        self.out.append(made.metric)
        return made

    def build(self) -> list[Metric]:
        self._meta()
        self._jobs()
        self._alerts()
        add_hosts(self.family, self.snap.hosts)
        add_gpus(self.family, self.snap.hosts)
        self._errors()
        self._ledgers()
        self._costs()
        self._profiles()
        self._scalars()
        return [*self.out, _dropped_family(self.budget)]

    def _meta(self) -> None:
        self.family("distmon_build_info", "distmon's version", ["version"]).add([__version__], 1)
        when = self.family(
            "distmon_snapshot_timestamp_seconds", "When distmon last judged every source"
        )
        when.add([], self.snap.generated_at)
        self.family("distmon_series_limit", "The --max-series bound").add([], self.budget.limit)
        self.family("distmon_jobs", "Jobs seen in the watched logdirs").add([], len(self.snap.jobs))
        self.family("distmon_problems", "Logdir-level problems (unreadable directories, ...)").add(
            [], len(self.snap.problems)
        )
        if self.notify is not None:
            self._notify_posts(self.notify)

    def _notify_posts(self, counts: Mapping[str, int]) -> None:
        self.out.append(_posts_family(counts, self.budget.take))

    def _jobs(self) -> None:
        status = StateSetMetricFamily(
            "distmon_job_status", "Each job's status (one of the states is 1)", labels=["job"]
        )
        seen: set[str] = set()
        updated = self.family(
            "distmon_job_last_update_timestamp_seconds",
            "Wall time of the newest point read from any of the job's runs",
            ["job"],
        )
        replicas = self.family("distmon_job_replicas", "Replicas (run.json)", ["job"])
        batch = self.family("distmon_job_global_batch_size", "Global batch (run.json)", ["job"])
        mfu = self.family(
            "distmon_mfu_ratio",
            "Model FLOPs utilisation: the job's newest perf/mfu, model FLOP/s over peak (0-1)",
            ["job"],
        )
        info = self.family(
            "distmon_job_info",
            "1 per job, with the scheduler that runs it where run.json names one (join on job)",
            INFO_LABELS,
        )
        ended = self.family(
            "distmon_job_end_timestamp_seconds",
            "When the job ended: run.json's end (finished, failed, diverged, stopped), else "
            "the scheduler's (a job Slurm ended while run.json says running)",
            ["job"],
        )
        for job in self.snap.jobs:
            name = label_text(job.name)
            if name in seen:  # equal to another job's once made safe
                self.budget.dropped += len(JOB_STATES)
            elif self.budget.take(len(JOB_STATES)):  # the states whole, or none
                seen.add(name)
                status.add_metric([name], {s: s == job.status for s in JOB_STATES})
            info.add(_info_labels(job), 1)
            updated.add([job.name], _last_update(job))
            mfu.add([job.name], job_mfu(job.parts))
            ended.add([job.name], _end_time(job))
            if job.agent is not None:
                replicas.add([job.name], job.agent.replicas)
                batch.add([job.name], job.agent.global_batch_size)
        self.out.append(status)

    def _alerts(self) -> None:
        # host and gpu tell run-less alerts apart (two hosts' gpu_imbalance): without them
        # their labels would be equal and all but one dropped as duplicates.
        labels = ["job", "run", "kind", "severity", "host", "gpu"]
        active = self.family(
            "distmon_alert",
            "An active alert (1) with its kind and severity; a GPU alert has no job or run "
            "but names its host (and GPU)",
            labels,
        )
        since = self.family(
            "distmon_alert_since_timestamp_seconds",
            "When the condition behind an active alert began",
            labels,
        )
        for alert in self.snap.alerts:
            run = alert.run
            values = [self.job_of.get(run, run) if run else None, run, alert.kind, alert.severity,
                      alert.host, alert.gpu]  # fmt: skip
            active.add(values, 1)
            since.add(values, alert.since)

    def _errors(self) -> None:
        failing = self.family(
            "distmon_producer_error_since_timestamp_seconds",
            "A failing source (reader, sampler, remote host) and since when",
            ["producer"],
        )
        for error in self.snap.errors:
            failing.add([error.producer], error.since)

    def _ledgers(self) -> None:
        """Where each job's wall time went (distcore.jobs.ledger): only the buckets measured."""
        seconds = self.family(
            "distmon_job_time_seconds",
            "Seconds of the job's wall time (all its attempts) per bucket: compute, "
            "input_wait, startup, checkpoint, restore, evaluation, recovery, lost, scheduler, "
            "teardown, unknown",
            ["job", "bucket"],
        )
        goodput = self.family(
            "distmon_job_goodput_ratio", "The job's compute seconds over its wall time", ["job"]
        )
        for job in self.snap.jobs:
            ledger = job_ledger(job)
            if ledger is None:
                continue
            goodput.add([job.name], ledger.goodput)
            for bucket, value in ledger.buckets.items():
                seconds.add([job.name, bucket], value)

    def _costs(self) -> None:
        """What each job cost (distcore.jobs.cost), in base units; unknown figures absent."""
        gpu = self.family("distmon_job_gpu_seconds",
                          "The job's wall time (all its attempts) times its GPUs", ["job"])
        energy = self.family("distmon_job_energy_joules",
                             "Energy the job's GPUs (and RAPL hosts) used over its life", ["job"])
        money = self.family("distmon_job_cost_usd",
                            "The job's GPU-hours and energy at the given prices", ["job"])
        prices = snapshot_prices(self.snap)
        for job in self.snap.jobs:
            cost = job_cost(job, prices)
            if cost is None:
                continue
            gpu.add([job.name], None if cost.gpu_hours is None else cost.gpu_hours * 3600.0)
            energy.add([job.name],
                       None if cost.energy_kwh is None else cost.energy_kwh * JOULES_PER_KWH)
            money.add([job.name], cost.money)

    def _profiles(self) -> None:
        """The mean step of each job's latest TensorFlow profile, split by part."""
        family = self.family(
            "distmon_profile_step_seconds",
            "Seconds of the mean step in the job's latest profile per part: input, "
            "device_compute, host_compute, communication, other",
            ["job", "part"],
        )
        for job in self.snap.jobs:
            profile = job.profile
            if isinstance(profile, ProfileSummary) and profile.step_count:
                total, count = profile.total, profile.step_count
                for part, ms in (("input", total.input_ms),
                                 ("device_compute", total.device_compute_ms),
                                 ("host_compute", total.host_compute_ms),
                                 ("communication", total.communication_ms),
                                 ("other", total.other_ms)):
                    family.add([job.name, part], ms / count / 1000.0)

    def _scalars(self) -> None:
        labels = ["job", "run", "tag"]
        value = self.family("distmon_scalar", "Each scalar series' last value", labels)
        step = self.family("distmon_scalar_step", "The step of that last value", labels)
        wall = self.family(
            "distmon_scalar_timestamp_seconds", "Wall time of that last value", labels
        )
        spikes = self.family("distmon_loss_spikes",
                             "Spikes seen in a loss series over every point read", labels)
        for job in self.snap.jobs:
            for part, run in job.parts.items():
                if part == "system" or part.startswith("system/"):  # exported as host/GPU series
                    continue
                if run.status == "gone":  # its files were deleted: its values are no longer
                    continue
                for tag, series in run.scalars.items():
                    key = [job.name, run.name, tag]
                    last = series.last_value
                    # A perf/ tag only within its documented range (distcore.bounded).
                    value.add(key, perf_value(tag, last) if tag in PERF_RANGES else last)
                    step.add(key, series.last_step)
                    wall.add(key, series.last_wall_time)
                    if series.spike_history is not None:
                        spikes.add(key, series.spike_history.count)


def _last_update(job: Job) -> float | None:
    times = [r.last_update for r in job.parts.values() if r.last_update is not None]
    return max(times) if times else None


def _info_labels(job: Job) -> list[object]:
    ref = job.agent.scheduler if job.agent is not None else None
    state = job.scheduler_state.state if job.scheduler_state is not None else None
    if ref is None:
        return [job.name, None, None, None, state, None]
    return [job.name, ref.kind, ref.slurm_job_id, ref.partition, state, ref.pod]


def _end_time(job: Job) -> float | None:
    if job.status in ENDED_STATUSES:
        end = job.agent.extra.get("end_time") if job.agent is not None else None
        if end is not None:  # bounded where run.json was read (distcore.bounded.timestamp)
            return float(end)
        return _last_update(job)
    state = job.scheduler_state
    return state.ended_at if state is not None and state.ended else None


def _dropped_family(budget: _Budget) -> Metric:
    return GaugeMetricFamily(
        "distmon_series_dropped",
        "Series left out of this scrape: over the --max-series bound, or equal to another "
        "once their labels were made safe",
        value=budget.dropped,
    )


def _posts_family(counts: Mapping[str, int], take: Callable[[], bool]) -> Metric:
    posts = CounterMetricFamily(
        "distmon_notify_posts",
        "Webhook posts by outcome: delivered, failed (one try, retried), refused (a 3xx or "
        "4xx: dropped), queue_full (never tried)",
        labels=["outcome"],
    )
    for outcome, count in counts.items():
        if take():
            posts.add_metric([outcome], count)
    return posts


def snapshot_families(
    snap: JobsSnapshot,
    max_series: int = DEFAULT_MAX_SERIES,
    notify: Mapping[str, int] | None = None,
) -> list[Metric]:
    """Every metric family of `snap` (and the webhook's posts by outcome, where `notify` gives
    them), with at most `max_series` series in all."""
    return _Families(snap, max_series, notify).build()


class SnapshotCollector(Collector):
    """A prometheus_client collector that renders `latest()` at each scrape, with
    `notify_counts()` where there is a webhook (before the first snapshot: the bound, the post
    counts and `distmon_series_dropped`)."""

    def __init__(
        self,
        latest: Callable[[], JobsSnapshot | None],
        max_series: int = DEFAULT_MAX_SERIES,
        notify_counts: Callable[[], Mapping[str, int]] | None = None,
    ) -> None:
        self._latest, self.max_series, self._notify = latest, max_series, notify_counts

    def describe(self) -> Iterable[Metric]:
        return ()  # no collect() at registration: the first snapshot may be far away

    def collect(self) -> Iterator[Metric]:
        snap = self._latest()
        if snap is not None:
            notify = self._notify() if self._notify is not None else None
            yield from snapshot_families(snap, self.max_series, notify)
            return
        budget = _Budget(self.max_series)
        if budget.take():
            yield GaugeMetricFamily("distmon_series_limit", "The --max-series bound",
                                    self.max_series)  # fmt: skip
        if self._notify is not None:  # counters exist from the start, at zero
            yield _posts_family(self._notify(), budget.take)
        yield _dropped_family(budget)
