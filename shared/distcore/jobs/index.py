"""JobIndex: the headless producer both front ends render. Runs, run.json, GPUs -> JobsSnapshot.

Inputs: a run store (the reader's snapshots and its change notifications), run.json files (read
here, cached by mtime, never on a UI thread), the local telemetry sampler, extra host sources
(remote GPUs) and extra producers whose `errors()` it gathers. Output: an immutable
`JobsSnapshot`, from `latest()` and to subscribers, recomputed on its own thread when the store
says something changed (at most once per `interval`) and every `interval` as time passes.

Incremental: a job whose runs' update counters and run.json did not change keeps its facts and
point alerts; only the clock-dependent rules run for it again, at O(1) per run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from distcore.alerts import Alert, keep_since, sort_alerts
from distcore.jobs.agent import AgentRecords
from distcore.jobs.hosts import local_history, local_host
from distcore.jobs.judge import JobFacts, facts_key, host_alerts, job_facts, judge_job
from distcore.jobs.model import AgentRecord, Host, HostSource, JobsSnapshot
from distcore.jobs.parts import group_runs, job_dir_of
from distcore.jobs.scheduler import SchedulerState, SlurmStates, slurm_job_ids
from distcore.listeners import Listeners
from distcore.producer import Producer, ProducerError, RunSource, Telemetry

if TYPE_CHECKING:
    from distcore.events.model import RunSnapshot

log = logging.getLogger(__name__)
Listener = Callable[[JobsSnapshot], None]
MAX_COALESCE_SECONDS = 1.0


@runtime_checkable
class AgentRecordSource(Protocol):
    """A producer that reads run.json itself (a remote reader): its job directories' records."""

    def agent_records(self) -> dict[Path, AgentRecord | None]: ...


def _errors_of(producer: Producer) -> tuple[ProducerError, ...]:
    try:
        return tuple(producer.errors())
    except Exception as err:  # a producer's bug is one more error, never the index's end
        return (ProducerError(type(producer).__name__, f"errors() failed: {err}", time.time()),)


def _problems_of(producer: Producer) -> tuple[str, ...]:
    """A producer's source-level problems (a directory it cannot list, a FIFO named like an
    event file), one line each."""
    try:
        return tuple(str(p) for p in producer.problems())
    except Exception as err:
        return (f"{type(producer).__name__}: problems() failed: {err}",)


class JobIndex:
    def __init__(
        self,
        store: RunSource,
        *,
        logdirs: Sequence[str] = (),
        telemetry: Telemetry | None = None,
        hosts: Sequence[HostSource] = (),
        producers: Sequence[Producer] = (),
        interval: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store, self._telemetry = store, telemetry
        self._host_sources, self._producers = tuple(hosts), tuple(producers)
        self._logdirs, self.interval, self._clock = tuple(logdirs), interval, clock
        self._records = AgentRecords()
        self._remote_records: dict[Path, AgentRecord | None] = {}
        self._facts: dict[str, JobFacts] = {}
        self._version = 0
        self._lock = threading.Lock()  # guards _latest
        self._compute_lock = threading.Lock()  # one refresh at a time (thread, tests, --once)
        self._latest: JobsSnapshot | None = None
        self._listeners: Listeners[JobsSnapshot] = Listeners()
        self._wake, self._stop = threading.Event(), threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._error: ProducerError | None = None
        self.refreshes = 0  # for tests and the benchmark

    # --- the producer's life ---------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("job index already started")
        self._unsubscribe = self._store.subscribe(lambda changed: self._wake.set())
        self._thread = threading.Thread(target=self._run, name="job-index", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._thread is not None:
            self._thread.join(timeout=10.0)

    def _run(self) -> None:
        # The first refresh is at once: time.monotonic() counts from boot, so a 0.0 start would
        # wait out the interval on a machine booted less than an interval ago.
        last = -float("inf")
        while not self._stop.is_set():
            self._wake.wait(timeout=max(0.0, last + self.interval - time.monotonic()))
            self._wake.clear()
            # Under a stream of changes, at most one refresh per interval (per second at most
            # when the interval is longer): the changes in between coalesce into it.
            wait = last + min(self.interval, MAX_COALESCE_SECONDS) - time.monotonic()
            if wait > 0 and self._stop.wait(wait):
                return
            if self._stop.is_set():
                return
            last = time.monotonic()
            self.refresh()

    def wake(self) -> None:
        """Refresh soon (e.g. the user asked to reload)."""
        self._wake.set()

    # --- output ------------------------------------------------------------------------------

    def latest(self) -> JobsSnapshot | None:
        with self._lock:
            return self._latest

    def subscribe(self, callback: Listener) -> Callable[[], None]:
        return self._listeners.subscribe(callback)

    def errors(self) -> tuple[ProducerError, ...]:
        return (self._error,) if self._error is not None else ()

    def problems(self) -> tuple[str, ...]:
        return ()  # the snapshot carries the other producers' problems

    def refresh(self) -> JobsSnapshot | None:
        """Compute a snapshot now, on the calling thread, and hand it to the subscribers.
        Never raises: a failure becomes the index's ProducerError and the last snapshot stays."""
        try:
            with self._compute_lock:
                snap = self._compute()
            self._error = None
        except Exception as err:
            log.exception("job index refresh failed")
            if self._error is None:
                self._error = ProducerError("jobs", f"{type(err).__name__}: {err}", time.time())
            return self.latest()
        with self._lock:
            self._latest = snap
        for listener in self._listeners.current():
            try:
                listener(snap)
            except Exception:
                log.exception("job index listener failed")
        return snap

    # --- the work ----------------------------------------------------------------------------

    def _facts_for(self, name: str, parts: dict[str, RunSnapshot]) -> JobFacts:
        cached = self._facts.get(name)
        if cached is not None and cached.directory is not None:
            directory = cached.directory  # a job's directory never moves: no path arithmetic
        else:
            first_part, first_run = next(iter(parts.items()))
            directory = job_dir_of(first_run.path, first_part)
        agent = self._agent_for(directory)
        if cached is not None and cached.key == facts_key(parts, agent):
            return cached
        self._version += 1
        return job_facts(name, parts, agent, self._version)

    def _agent_for(self, directory: Path) -> AgentRecord | None:
        """run.json: a remote producer's copy for its job directories (a `host:/path` or URL
        is no local path to stat), else the local file."""
        if directory in self._remote_records:
            return self._remote_records[directory]
        head = directory.parts[0] if directory.parts else ""
        if not directory.is_absolute() and ":" in head:
            return None  # remote, not read yet
        return self._records.get(directory)

    def _gather_remote_records(self) -> dict[Path, AgentRecord | None]:
        """Producers that read run.json themselves (remote readers) offer `agent_records()`."""
        found: dict[Path, AgentRecord | None] = {}
        for producer in self._producers:
            if isinstance(producer, AgentRecordSource):
                found.update(producer.agent_records())
        return found

    def _compute(self) -> JobsSnapshot:
        now = self._clock()
        self._remote_records = self._gather_remote_records()
        grouped = group_runs(self._store.snapshot())
        self._facts = {name: self._facts_for(name, parts) for name, parts in grouped.items()}
        self._records.forget({f.directory for f in self._facts.values() if f.directory})
        telemetry = self._telemetry.latest() if self._telemetry is not None else None
        local = local_host(telemetry, self._telemetry.interval if self._telemetry else None)
        states = self._scheduler_states()
        jobs = tuple(judge_job(f, now, local.gpus, states) for f in self._facts.values())
        hosts = (local, *(h for j in jobs for h in j.hosts), *self._remote_hosts())
        found: list[Alert] = [a for j in jobs for a in j.alerts]
        found += host_alerts(hosts, now)
        previous = self._latest.alerts if self._latest is not None else ()
        self.refreshes += 1
        return JobsSnapshot(
            generated_at=now,
            logdirs=self._logdirs,
            jobs=jobs,
            hosts=hosts,
            alerts=sort_alerts(keep_since(previous, found)),
            errors=self._gather_errors(),
            problems=tuple(p for producer in self._producers for p in _problems_of(producer)),
            local_history=local_history(self._telemetry.history, local) if self._telemetry else {},
            local_telemetry=telemetry,
        )

    def _scheduler_states(self) -> Mapping[str, SchedulerState]:
        """Tell the scheduler producer (distcore.jobs.scheduler, among `producers`) which Slurm
        jobs the logdirs name; take its cached states. Never waits for the scheduler."""
        wanted = slurm_job_ids(f.agent.scheduler for f in self._facts.values() if f.agent)
        for producer in self._producers:
            if isinstance(producer, SlurmStates):
                producer.track(wanted)
                return producer.states()
        return {}

    def _remote_hosts(self) -> list[Host]:
        out: list[Host] = []
        for source in self._host_sources:
            try:
                out += source.hosts()
            except Exception as err:
                name = type(source).__name__
                out.append(Host(f"error:{name}", name, "ssh", error=f"{err}"))
        return out

    def _gather_errors(self) -> tuple[ProducerError, ...]:
        found = [*self.errors()]
        for producer in (self._telemetry, *self._producers):
            if producer is not None:
                found += _errors_of(producer)
        return tuple(found)
