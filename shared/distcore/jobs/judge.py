"""A job's facts (computed again only when its inputs change) and its judgement (every refresh).

The rules that read points (input stall, NaN loss, rising loss, the cadence) run in `job_facts`,
once per change of the job's runs or run.json; what depends on the clock (a stall, a host's
age, GPUs idle while steps advance) is cheap and runs in `judge_job` on the cached facts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distcore import names
from distcore.alerts import Alert, sort_alerts
from distcore.alerts.cadence import (
    STALL_FACTOR,
    STALL_HORIZON_SECONDS,
    STALL_MIN_SECONDS,
    is_advancing,
    run_stalled,
)
from distcore.alerts.efficiency import busy_not_computing, mfu_dropped
from distcore.alerts.gpus import gpu_alerts, input_bound_suspected
from distcore.alerts.input_advice import input_advice
from distcore.alerts.outcomes import (
    agent_died,
    agent_outcome,
    agent_process_gone,
    agent_step_gone,
    recovered,
    unreadable,
)
from distcore.alerts.series import input_stall
from distcore.alerts.stragglers import straggler_alert
from distcore.alerts.validation import validation_alerts
from distcore.alerts.workers import hung_alert
from distcore.events.snapshots import RunSnapshot
from distcore.jobs.hosts import host_from_system_run, is_stale
from distcore.jobs.liveness import is_local, process_gone
from distcore.jobs.parts import is_system_part, job_dir_of, job_status
from distcore.jobs.scheduler import SchedulerState, ended_long_enough, step_gone
from distcore.jobs.snapshots import AgentRecord, Host, Job
from distcore.location import RunLocation
from distcore.telemetry.samples import GpuDevice

FactsKey = tuple[Any, ...]
log = logging.getLogger(__name__)


def facts_key(parts: Mapping[str, RunSnapshot], agent: AgentRecord | None) -> FactsKey:
    """What a job's facts depend on: each run's update counter (and, for stores that do not
    count, its newest point and files), and run.json as read."""
    runs = tuple((p, r.version, r.last_update, r.files, r.status) for p, r in parts.items())
    return (runs, agent)


@dataclass(frozen=True)
class JobFacts:
    key: FactsKey
    name: str
    directory: RunLocation | None
    parts: Mapping[str, RunSnapshot]
    agent: AgentRecord | None
    point_alerts: tuple[Alert, ...]  # input stall, NaN loss, rising loss, the agent's outcome
    intervals: Mapping[str, float | None]  # run name -> cadence, for the stall rule
    hosts: tuple[Host, ...]  # from the system/ parts
    version: int


def _outcome(name: str, parts: Mapping[str, RunSnapshot], agent: AgentRecord | None) -> list[Alert]:
    if agent is None:
        return []
    end = agent.extra.get("end_time")
    newest = max((r.last_update for r in parts.values() if r.last_update is not None), default=None)
    if agent.unreadable is not None:
        return [unreadable(name, agent.unreadable, newest)]
    since = float(end) if isinstance(end, int | float) else newest
    found = agent_outcome(name, agent.status, agent.last_step, agent.error, since)
    return ([found] if found is not None else []) + recovered(name, agent.recoveries, since)


def _advised(alerts: list[Alert], run: RunSnapshot, advice: str | None) -> list[Alert]:
    """The run's point alerts, an input stall's recommendation read from the job's own pipeline
    where run.json gives it (the rule runs again only for a run that raised one)."""
    if advice is None:
        return alerts
    return [(input_stall(run, advice) or a) if a.kind == "input_stall" else a for a in alerts]


def job_facts(
    name: str, parts: Mapping[str, RunSnapshot], agent: AgentRecord | None, version: int
) -> JobFacts:
    return job_facts_many([(name, parts, agent, version)])[0]


FactsInput = tuple[str, Mapping[str, RunSnapshot], AgentRecord | None, int]


FACTS_CHUNK = 2048  # jobs whose tails share one array: bounds the arrays (~5 MB), not the gain


def job_facts_many(jobs: Sequence[FactsInput]) -> list[JobFacts]:
    """`job_facts` of each (name, parts, agent, version), the same facts, computed together:
    the point rules' arithmetic runs over many jobs' runs at once (tails.series_alerts_many,
    tails.usual_intervals), which is where numpy pays on a sweep of small runs."""
    out: list[JobFacts] = []
    for start in range(0, len(jobs), FACTS_CHUNK):
        out += _facts_together(jobs[start:start + FACTS_CHUNK])
    return out


def job_facts_each(jobs: Sequence[FactsInput]) -> list[JobFacts]:
    """`job_facts_many`, where a job whose data no rule foresaw (an exception) gets facts that
    say so, its status "unreadable", and every other job's facts are as ever."""
    try:
        return job_facts_many(jobs)
    except Exception:
        log.debug("facts of %d jobs together failed; each alone", len(jobs), exc_info=True)
    return [_facts_alone(job) for job in jobs]


def _facts_alone(job: FactsInput) -> JobFacts:
    name, parts, agent, version = job
    try:
        return job_facts_many([job])[0]
    except Exception as err:  # the data's fault: this job's row says so
        log.debug("facts of job %r failed", name, exc_info=True)
        first_part, first_run = next(iter(parts.items()))
        why = why_text(err)
        return JobFacts(
            key=facts_key(parts, agent), name=name,
            directory=job_dir_of(first_run.path, first_part), parts=parts,
            agent=AgentRecord(unreadable=why), point_alerts=(unreadable(name, why, None),),
            intervals={}, hosts=(), version=version,
        )


def why_text(err: Exception) -> str:
    """An exception in a few words, for the row of the job whose data raised it."""
    return f"{type(err).__name__}: {err}"[:200]


def unreadable_job(facts: JobFacts, err: Exception) -> Job:
    """The row of a job that judging raised for: "unreadable", and why, in its alert."""
    why = why_text(err)
    return Job(name=facts.name, directory=facts.directory, parts=facts.parts,
               status="unreadable", agent=facts.agent, hosts=(),
               alerts=(unreadable(facts.name, why, None),), version=facts.version)


def _facts_together(jobs: Sequence[FactsInput]) -> list[JobFacts]:
    from distcore import tails  # numpy: loaded with the reader, not with the dashboard

    training = [[r for p, r in parts.items() if not is_system_part(p)] for _, parts, _, _ in jobs]
    runs = [run for runs_of in training for run in runs_of]
    point = iter(tails.series_alerts_many(runs))
    cadence = iter(tails.usual_intervals(runs))
    out = []
    for (name, parts, agent, version), runs_of in zip(jobs, training, strict=True):
        found = _outcome(name, parts, agent)
        advice = input_advice(agent.pipeline) if agent is not None else None
        validation = parts.get(names.VALIDATION_DIR)
        intervals: dict[str, float | None] = {}
        for run in runs_of:
            alerts = _advised(next(point), run, advice)
            found += validation_alerts(alerts, run) if run is validation else alerts
            intervals[run.name] = next(cadence)
        first_part, first_run = next(iter(parts.items()))
        out.append(JobFacts(
            key=facts_key(parts, agent),
            name=name,
            directory=job_dir_of(first_run.path, first_part),
            parts=parts,
            agent=agent,
            point_alerts=tuple(found),
            intervals=intervals,
            hosts=tuple(
                host_from_system_run(name, p, r) for p, r in parts.items() if is_system_part(p)
            ),
            version=version,
        ))
    return out


def judge_job(facts: JobFacts, now: float, local_gpus: Sequence[GpuDevice],
              scheduler: Mapping[str, SchedulerState] | None = None) -> Job:
    """The job at `now`: its status, and its alerts including the clock-dependent ones.
    `scheduler`: Slurm job id -> its state, as the scheduler producer last heard it."""
    agent_status = facts.agent.status if facts.agent is not None else None
    found = list(facts.point_alerts)
    ref = facts.agent.scheduler if facts.agent is not None else None
    job_id = ref.slurm_job_id if ref is not None else None
    state = scheduler.get(job_id) if scheduler and job_id else None
    # A job whose scheduler's state is known is judged by it below (the job's or its step's
    # end, in the scheduler's words); else by its process on this machine.
    if agent_status == names.STATUS_RUNNING and facts.agent is not None and state is None \
            and process_gone(facts.agent.extra):
        # Its end is now: no stall, hang or idle-GPU rule applies to a job without a process.
        agent_status = names.STATUS_DIED
        found.append(agent_process_gone(facts.name, facts.agent.extra.get("pid"),
                                        facts.agent.extra.get("host"), now))
    training = [r for p, r in facts.parts.items() if not is_system_part(p)]
    for run in training:
        stalled = run_stalled(run, now, agent_status, facts.intervals.get(run.name))
        if stalled is not None:
            found.append(stalled)
    # GPUs idle while steps advance: the job's own workers' GPUs where it records them.
    fresh = [h for h in facts.hosts if not is_stale(h, now)]
    gpus = [g for h in fresh for g in h.gpus] if fresh else list(local_gpus)
    if agent_status in (None, "running"):
        found += input_bound_suspected(training, gpus, now, facts.intervals)
        found += _efficiency(facts, training, gpus, now)
    if agent_status == names.STATUS_RUNNING and facts.agent is not None and facts.agent.workers:
        found += _worker_alerts(facts, facts.agent, now)
    if state is not None:
        # Only once the end has settled: a shared filesystem may show run.json's last write late.
        died = agent_died(facts.name, agent_status, state.job_id, state.state,
                                 ended_long_enough(state, now), now)
        if died is not None:
            found.append(died)
        elif agent_status == names.STATUS_RUNNING and ref is not None and ref.step_id and \
                step_gone(state, ref.step_id, _start_time(facts.agent)):
            found.append(agent_step_gone(facts.name, state.job_id, ref.step_id,
                                                state.steps_at))
    return Job(
        name=facts.name,
        directory=facts.directory,
        parts=facts.parts,
        status=names.STATUS_DIED if agent_status == names.STATUS_DIED
        else job_status(facts.parts, facts.agent),
        agent=facts.agent,
        hosts=facts.hosts,
        alerts=sort_alerts(found),
        version=facts.version,
        scheduler_state=state,
    )


def _efficiency(facts: JobFacts, training: Sequence[RunSnapshot], gpus: Sequence[GpuDevice],
                now: float) -> list[Alert]:
    """Busy GPUs that compute little (GPM), and MFU fallen below the job's own level."""
    mixed = bool(facts.agent is not None and facts.agent.mixed_precision)
    # The GPUs are this job's only while its steps advance (another job may own them now).
    advancing = any(is_advancing(r, now, facts.intervals.get(r.name)) for r in training)
    found = [busy_not_computing(gpus, now, facts.name, mixed_precision=mixed) if advancing
             else None, *(mfu_dropped(run, now) for run in training)]
    return [a for a in found if a is not None]
def _worker_alerts(facts: JobFacts, agent: AgentRecord, now: float) -> list[Alert]:
    """A hang (naming who holds the job, and the stacks' paths) or else a straggler."""
    directory = str(facts.directory) if facts.directory is not None else None
    hung = hung_alert(facts.name, agent.workers, now, directory, agent.last_step)
    if hung is not None:
        return [hung]
    straggler = straggler_alert(facts.name, agent.workers, now)
    return [straggler] if straggler is not None else []


def _start_time(agent: AgentRecord | None) -> float | None:
    start = agent.extra.get("start_time") if agent is not None else None
    return float(start) if isinstance(start, int | float) and not isinstance(start, bool) else None


def host_alerts(hosts: Sequence[Host], now: float) -> list[Alert]:
    """GPU rules per host (fresh ones only: a stale host's figures are old news)."""
    found: list[Alert] = []
    for host in hosts:
        if host.source != "local" and is_stale(host, now):
            continue
        where = "" if host.source == "local" else f" on {host.name}"
        found += gpu_alerts(host.gpus, now, where, host.name)
    return found


def clock_free(facts: JobFacts, now: float) -> bool:
    """True when `judge_job(facts, t)` is the same for every `t >= now` (same GPUs, no
    scheduler state): no run can stall or be seen advancing any more. Lets the index keep an
    ended or long-silent job's judgement instead of judging it again every refresh (a sweep's
    10,000 jobs). Any clock-dependent rule added to judge_job must be reflected here."""
    status = facts.agent.status if facts.agent is not None else None
    if status not in (None, names.STATUS_RUNNING):
        return True  # ended jobs never stall, and input-bound is for running ones
    if status == names.STATUS_RUNNING and is_local(facts.agent.extra if facts.agent else {}):
        return False  # its process may die at any moment
    if facts.agent is not None and facts.agent.workers:
        return False  # heartbeats age: a hang is judged on the clock
    for part, run in facts.parts.items():
        if is_system_part(part) or run.status == "gone" or run.last_update is None:
            continue
        interval = facts.intervals.get(run.name)
        if interval is None:
            continue
        limit = max(STALL_FACTOR * interval, STALL_MIN_SECONDS)
        if status is None and now - run.last_update > max(limit, STALL_HORIZON_SECONDS):
            continue  # just old: neither stalled nor advancing, and only older from now on
        return False
    return True
