"""JobIndex: the headless producer both front ends render. Runs, run.json, GPUs -> JobsSnapshot.

Inputs: a run store (the reader's snapshots and its change notifications), run.json files (read
here, cached by mtime, never on a UI thread), the local telemetry sampler, the scheduler's
states (Slurm), extra host sources (remote GPUs) and extra producers whose `errors()` it
gathers. Output: an immutable `JobsSnapshot`, from `latest()` and to subscribers, recomputed
on its own thread when the store says something changed (at most once per `interval`) and every
`interval` as time passes.

Incremental: a refresh costs what changed, not every job (a sweep has 10,000). The store hands
out the same run objects while a run is unchanged, so only jobs with a changed run are grouped
again; a job whose runs and run.json did not change keeps its facts and point alerts, and keeps
its whole judgement once no clock-dependent rule can change it (ended, or silent for long:
judge.clock_free). Where the logdir watcher tells which run.json were written (`agent_files`),
a job's run.json is looked at (a `stat`) when its runs changed or the watcher named it, and no
other (a sweep's 100,000 jobs have none: a share of them looked for by turns was thousands of
failed stats a second, its idle CPU). Without it (remote jobs, a store of its own), every
refresh for jobs that have one, that changed, or are live while few are, and a rotating share
of the others. All of them after `wake()`.

Its rooms: parts.py groups the runs into jobs (`regroup`), judge.py builds facts and judges,
agent.py reads run.json and says which to look at (`due_checks`), inputs.py gathers from the
other producers (errors, problems, hosts, records, states); here the caches and the thread.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from distcore.alerts import Alert, keep_since, sort_alerts
from distcore.errors import descriptor_shortage
from distcore.events.snapshots import RunSnapshot
from distcore.jobs.agent import AgentRecords, due_checks
from distcore.jobs.clocks import Sightings, on_our_clock
from distcore.jobs.hosts import local_history, local_host
from distcore.jobs.inputs import (
    AgentFileSource,
    AgentRecordSource,
    RunSource,
    SchedulerSource,
    Telemetry,
    errors_of,
    problems_of,
    remote_hosts,
    remote_records,
    scheduler_states,
)
from distcore.jobs.judge import (
    FactsInput,
    JobFacts,
    clock_free,
    facts_key,
    host_alerts,
    job_facts_each,
    judge_job,
    unreadable_job,
)
from distcore.jobs.parts import Grouping, job_dir_of, regroup
from distcore.jobs.profiled import JobProfiles
from distcore.jobs.profiles import Profile, ProfileReader
from distcore.jobs.scheduler import SchedulerState
from distcore.jobs.snapshots import AgentRecord, Host, HostSource, Job, JobsSnapshot
from distcore.listeners import Listeners
from distcore.location import RunLocation
from distcore.producer import Failing, Loop, Producer, ProducerError, paced

log = logging.getLogger(__name__)
Listener = Callable[[JobsSnapshot], None]
MAX_COALESCE_SECONDS = 1.0
# A refresh costs about what the jobs number: 100,000 of them took most of each second of a
# first read, the GIL the readers need with it. Paced to this share of the time (at most this
# many seconds apart), the listing goes on between refreshes.
SHARE, MAX_PAUSE = 0.25, 4.0


class JobIndex:
    def __init__(
        self,
        store: RunSource,
        *,
        logdirs: Sequence[str] = (),
        telemetry: Telemetry | None = None,
        hosts: Sequence[HostSource] = (),
        scheduler: SchedulerSource | None = None,
        records: Sequence[AgentRecordSource] = (),
        producers: Sequence[Producer] = (),
        profiles: ProfileReader | None = None,
        interval: float = 1.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        prices: tuple[float | None, float | None] = (None, None),
        agent_files: AgentFileSource | None = None,
    ) -> None:
        """`clock`: the time alerts and snapshots carry; `monotonic`: what judges how long a
        heartbeat or a recorded sample has not changed (another host's clock never does).
        `scheduler`: its states reach the jobs, its errors the snapshot (not also among
        `producers`); `records`: producers that read run.json themselves (the remote readers,
        also among `producers`); `producers`: those whose errors and problems the snapshot
        carries; `profiles`: reads the jobs' TensorFlow profiles, told the job directories
        here (started and closed by its owner, its errors gathered as the producers');
        `prices`: USD per GPU-hour and per kWh, carried by every snapshot; `agent_files`: tells
        which local run.json were written (the logdir watcher of the store's local runs)."""
        self._prices = prices
        self._profiles = profiles
        self._seen_profiles: Mapping[Path, Profile] | None = None
        self._profiled = JobProfiles(profiles) if profiles is not None else None
        self._store, self._telemetry, self._scheduler = store, telemetry, scheduler
        self._host_sources, self._producers = tuple(hosts), tuple(producers)
        self._record_sources = tuple(records)
        self._agent_files = agent_files
        self._by_dir: dict[Path, str] = {}  # a local job's directory -> the job
        self._moved = False  # a local job's directory gone or moved since the last forget
        self._ordered: object = None  # the grouping whose order the facts last took
        self._remote: set[str] = set()  # jobs whose run.json a remote reader reads
        self._logdirs, self.interval, self._clock = tuple(logdirs), interval, clock
        self._records = AgentRecords()
        self._sightings = Sightings(monotonic)
        self._remote_records: dict[RunLocation, AgentRecord | None] = {}
        self._facts: dict[str, JobFacts] = {}
        self._version = 0
        # What the last refresh saw, so that the next one costs what changed.
        self._grouping = Grouping()
        self._judged: dict[str, tuple[JobFacts, Job, bool]] = {}  # facts, job, kept as is
        self._dynamic: set[str] = set()  # jobs judged again every refresh
        self._jobs: tuple[Job, ...] = ()
        self._job_hosts: tuple[Host, ...] = ()
        self._job_alerts: tuple[Alert, ...] = ()
        self._cursor = 0  # where the rotating run.json check goes on (agent.due_checks)
        self._check_all = True
        self._watched: set[str] = set()  # jobs with a run.json: looked at always
        self._live: set[str] = set()  # jobs with a live run: always too, while they are few
        self._last_now = float("-inf")
        self._lock = threading.Lock()  # guards _latest
        self._compute_lock = threading.Lock()  # one refresh at a time (thread, tests, --once)
        self._latest: JobsSnapshot | None = None
        self._listeners: Listeners[JobsSnapshot] = Listeners()
        self._failing = Failing("jobs")
        # refresh() turns its own failures into the ProducerError; a failure of the tick
        # around it shows the same way (logged at debug level with its traceback).
        self._loop = Loop("job-index", self._tick, interval=interval, on_error=self._tick_failed)
        self._next_tick = -float("inf")
        self._unsubscribe: tuple[Callable[[], None], ...] = ()
        self.refreshes = 0  # for tests and the benchmark

    # --- the producer's life ---------------------------------------------------------------

    def start(self) -> None:
        """Refresh on the loop's thread at once, then every `interval` and when the store
        says something changed."""
        if self._loop.started:
            raise RuntimeError("job index already started")
        self._unsubscribe = (self._store.subscribe(lambda changed: self._loop.wake()),)
        if self._agent_files is not None:
            self._unsubscribe += (self._agent_files.subscribe_agent_changes(self._loop.wake),)
        if self._profiles is not None:
            self._profiles.subscribe(self._loop.wake)
        self._loop.start()

    def close(self) -> None:
        self._loop.stop()
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._loop.join(10.0)

    def _tick(self) -> None:
        # Under a stream of changes, at most one refresh per interval (per second at most when
        # the interval is longer), and costly ones at most SHARE of the time: the changes that
        # wake it in between coalesce into the next.
        wait = self._next_tick - time.monotonic()
        if self._latest is None or not self._latest.jobs:
            wait = 0.0  # the first rows show as soon as anything is read
        if wait > 0 and self._loop.sleep(wait):
            return
        began = time.monotonic()
        self.refresh()
        ended = time.monotonic()
        self._next_tick = max(began + min(self.interval, MAX_COALESCE_SECONDS),
                              paced(ended, ended - began, SHARE, MAX_PAUSE))

    def _tick_failed(self, err: Exception) -> None:
        self._failing.fail(f"{type(err).__name__}: {err}", time.time())

    def wake(self) -> None:
        """Refresh soon (e.g. the user asked to reload), looking at every run.json again."""
        self._check_all = True
        self._loop.wake()

    # --- output ------------------------------------------------------------------------------

    def latest(self) -> JobsSnapshot | None:
        with self._lock:
            return self._latest

    def subscribe(self, callback: Listener) -> Callable[[], None]:
        return self._listeners.subscribe(callback)

    def errors(self) -> tuple[ProducerError, ...]:
        return self._failing.errors()

    def problems(self) -> tuple[str, ...]:
        return ()  # the snapshot carries the other producers' problems

    def refresh(self) -> JobsSnapshot | None:
        """Compute a snapshot now, on the calling thread, and hand it to the subscribers.
        Never raises: a failure becomes the index's ProducerError and the last snapshot stays."""
        try:
            with self._compute_lock:
                snap = self._compute()
            self._failing.ok()
        except Exception as err:
            shortage = descriptor_shortage(err)  # the user's limit, not a bug: no traceback
            if shortage is None:
                log.exception("job index refresh failed")
            else:
                log.error("job index refresh failed: %s", shortage)
            self._failing.fail(shortage or f"{type(err).__name__}: {err}", time.time())
            latest = self.latest()
            self._publish(self._with_own_failure(latest))
            return latest
        with self._lock:
            self._latest = snap
        self._publish(snap)
        return snap

    def _with_own_failure(self, latest: JobsSnapshot | None) -> JobsSnapshot:
        """What the front ends show while refreshing fails: the last rows (none before the
        first), with the errors as they are now, the index's own first: shown, not only
        logged, however long the failure lasts."""
        base = latest or JobsSnapshot(self._clock(), self._logdirs, (), (), ())
        return dataclasses.replace(base, errors=self._gather_errors())

    def _publish(self, snap: JobsSnapshot) -> None:
        for listener in self._listeners.current():
            try:
                listener(snap)
            except Exception:
                log.exception("job index listener failed")

    # --- the work ----------------------------------------------------------------------------

    def _facts_for(self, name: str, parts: dict[str, RunSnapshot]) -> JobFacts | FactsInput:
        """The job's facts where nothing they were built from changed; else what to build them
        from (job_facts_many builds all of a refresh's together)."""
        cached = self._facts.get(name)
        if cached is not None and cached.directory is not None:
            directory = cached.directory  # a job's directory never moves: no path arithmetic
        else:
            first_part, first_run = next(iter(parts.items()))
            directory = job_dir_of(first_run.path, first_part)
        agent = self._agent_for(directory)
        if cached is not None and cached.parts is parts and cached.agent is agent:
            return cached
        if cached is not None and cached.key == facts_key(parts, agent):
            return cached
        self._version += 1
        return (name, parts, agent, self._version)

    def _agent_for(self, directory: RunLocation) -> AgentRecord | None:
        """run.json: the local file, or for a remote job directory its reader's copy (never a
        local stat: a remote place has no local path)."""
        local = directory.local
        if local is None:
            return self._remote_records.get(directory)  # None: not read yet
        return self._records.get(local)

    def _due(self, touched: set[str]) -> set[str] | None:
        """The jobs whose run.json gets a look this refresh (None: all of them)."""
        written = self._agent_files.agent_changes() if self._agent_files is not None else None
        if self._check_all:
            self._check_all = False
            return None
        if written is None:
            due, self._cursor = due_checks(
                list(self._grouping.jobs), self._cursor, touched | self._watched, self._live
            )
            return due
        named = {self._by_dir[d] for d in written if d in self._by_dir}
        if not self._remote:
            return touched | named
        remote = self._remote
        due, self._cursor = due_checks(sorted(remote), self._cursor, self._watched & remote,
                                       self._live & remote)  # fmt: skip
        return touched | named | due

    def _place(self, name: str, facts: JobFacts | None) -> None:
        """Where the job's run.json is: found by the directory the watcher names, or among
        the remote jobs (`facts` None: the job is gone)."""
        old = self._facts.get(name)
        local = facts.directory.local if facts and facts.directory else None
        if old is not None and old.directory is not None and old.directory.local is not None:
            self._by_dir.pop(old.directory.local, None)
            self._moved |= old.directory.local != local  # its run.json's entry to forget
        self._remote.discard(name)
        if local is not None:
            self._by_dir[local] = name
        elif facts is not None:
            self._remote.add(name)

    def _judge(self, facts: JobFacts, now: float, local: Host,
               states: Mapping[str, SchedulerState]) -> Job:
        """The job at `now`; kept (not judged again) while nothing can change it."""
        ref = facts.agent.scheduler if facts.agent is not None else None
        job_id = ref.slurm_job_id if ref is not None else None
        kept = self._judged.get(facts.name)
        if kept is not None and kept[0] is facts and kept[2]:
            return kept[1]
        try:
            seen, note = on_our_clock(self._sightings, facts, now)
            job = judge_job(seen, now, local.gpus, states)
            if note is not None:
                job = dataclasses.replace(job, alerts=sort_alerts((*job.alerts, note)))
            # A job Slurm runs is judged every time: its state comes and goes with the scheduler.
            static = job_id is None and clock_free(seen, now)
        except Exception as err:  # this job's data: its row says so, the others are judged
            log.debug("judging job %r failed", facts.name, exc_info=True)
            job, static = unreadable_job(facts, err), False
        self._judged[facts.name] = (facts, job, static)
        if static:
            self._dynamic.discard(facts.name)
        else:
            self._dynamic.add(facts.name)
        return job

    def _update_facts(self, touched: set[str]) -> set[str]:
        """Facts again for the jobs touched or whose run.json is due; the jobs whose facts
        changed."""
        grouped = self._grouping.jobs
        due = self._due(touched)
        names = grouped.keys() if due is None else due & grouped.keys()
        renewed = set()
        found = [(name, self._facts_for(name, grouped[name])) for name in names]
        built = iter(job_facts_each([f for _, f in found if not isinstance(f, JobFacts)]))
        for name, facts_or_input in found:
            facts = facts_or_input if isinstance(facts_or_input, JobFacts) else next(built)
            if facts is self._facts.get(name):
                continue
            self._place(name, facts)
            self._facts[name] = facts
            renewed.add(name)
            for kind, member in (
                (self._watched, facts.agent is not None),
                (self._live, any(r.status == "live" for r in facts.parts.values())),
            ):
                if member:
                    kind.add(name)
                else:
                    kind.discard(name)
        if touched:
            self._sightings.keep(set(grouped))
            gone = self._facts.keys() - grouped.keys()
            for name in gone:
                self._place(name, None)
                del self._facts[name]
                self._judged.pop(name, None)
                self._watched.discard(name)
                self._live.discard(name)
                self._dynamic.discard(name)
            # The grouping is a new dict when jobs were added (in name order): only then can
            # the order differ; a pass over every job per refresh cost a sweep's first read.
            if grouped is not self._ordered or len(self._facts) != len(grouped):
                if list(self._facts) != list(grouped):
                    self._facts = {name: self._facts[name] for name in grouped}
                self._ordered = grouped
            if gone or self._moved:
                self._moved = False
                self._records.forget(set(self._by_dir))
        return renewed

    def _compute(self) -> JobsSnapshot:
        now = self._clock()
        if now < self._last_now:  # an injected clock went back: judge everything again
            self._judged = {}
            self._dynamic = set(self._facts)
        self._last_now = now
        self._remote_records = remote_records(self._record_sources)
        touched = regroup(self._grouping, self._store.snapshot())
        renewed = self._update_facts(touched)
        if touched and self._profiled is not None:
            self._profiled.watch(self._facts, touched)
        telemetry = self._telemetry.latest() if self._telemetry is not None else None
        local = local_host(telemetry, self._telemetry.interval if self._telemetry else None)
        # The jobs with a run.json: not every job's facts each refresh (a sweep has 100,000).
        agents = (a for n in self._watched if (a := self._facts[n].agent) is not None)
        states = scheduler_states(self._scheduler, agents)
        # Only jobs whose facts changed, and those the clock or the scheduler can change.
        changed = bool(touched)
        for name in renewed | self._dynamic:
            kept = self._judged.get(name)
            changed |= self._judge(self._facts[name], now, local, states) is not (
                kept[1] if kept is not None else None
            )
        profiles = self._profiles.latest() if self._profiles is not None else None
        if profiles is not self._seen_profiles:
            changed, self._seen_profiles = True, profiles
        if changed:
            judged = (self._judged[name][1] for name in self._facts)
            jobs = tuple(judged) if self._profiled is None else \
                self._profiled.merge(judged, profiles or {}, now)
            self._jobs = jobs
            self._job_hosts = tuple(h for j in jobs for h in j.hosts)
            self._job_alerts = tuple(a for j in jobs for a in j.alerts)
        hosts = (local, *self._job_hosts, *remote_hosts(self._host_sources))
        found: list[Alert] = [*self._job_alerts, *host_alerts(hosts, now)]
        previous = self._latest.alerts if self._latest is not None else ()
        self.refreshes += 1
        return JobsSnapshot(
            generated_at=now,
            logdirs=self._logdirs,
            jobs=self._jobs,
            hosts=hosts,
            alerts=sort_alerts(keep_since(previous, found)),
            errors=self._gather_errors(),
            problems=problems_of(self._others()),
            local_history=local_history(self._telemetry.history, local) if self._telemetry else {},
            local_telemetry=telemetry,
            price_gpu_hour=self._prices[0],
            price_kwh=self._prices[1],
        )

    def _gather_errors(self) -> tuple[ProducerError, ...]:
        """The index's own errors, then the sampler's, then the other producers'."""
        others = self._others()
        failing = others if self._telemetry is None else (self._telemetry, *others)
        return (*self.errors(), *errors_of(failing))

    def _others(self) -> tuple[Producer, ...]:
        """The producers whose errors and problems the snapshot carries, in order."""
        scheduler = () if self._scheduler is None else (self._scheduler,)
        profiles = () if self._profiles is None else (self._profiles,)
        return (*self._producers, *scheduler, *profiles)
