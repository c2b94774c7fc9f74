"""What a JobIndex takes from its producers: the protocols of its typed inputs beyond the
producer kit's (the runs, this machine's telemetry, the scheduler, the readers that read
run.json themselves), and the gathering of the producers' errors, problems, hosts, records
and states.

Gathering never fails: a producer's own bug (its `errors()` raising, a host source that
cannot answer) becomes one more error or host line in the snapshot, never the index's end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Protocol

from distcore.events.snapshots import RunSnapshot
from distcore.jobs.scheduler import SchedulerState, slurm_job_ids
from distcore.jobs.snapshots import AgentRecord, Host, HostSource
from distcore.location import RunLocation
from distcore.producer import Producer, ProducerError
from distcore.telemetry.samples import TelemetrySnapshot


class RunSource(Protocol):
    """The runs a job index groups (a RunStore): their snapshots and change notifications."""

    def snapshot(self) -> tuple[RunSnapshot, ...]: ...
    def subscribe(self, callback: Callable[[frozenset[str]], None]) -> Callable[[], None]: ...


class Telemetry(Producer, Protocol):
    """This machine's GPU sampler: its latest snapshot and each metric's kept history."""

    interval: float

    def latest(self) -> TelemetrySnapshot | None: ...
    def sample_once(self) -> TelemetrySnapshot: ...
    def history(self, key: str) -> tuple[float | None, ...]: ...


class AgentRecordSource(Protocol):
    """A producer that reads run.json itself (a remote reader): its job directories' records."""

    def agent_records(self) -> dict[RunLocation, AgentRecord | None]: ...


class AgentFileSource(Protocol):
    """What tells which local job directories' run.json was written (the logdir watcher): the
    index then looks at those alone, and at no run.json by turns."""

    def agent_changes(self) -> frozenset[Path]: ...
    def subscribe_agent_changes(self, callback: Callable[[], None]) -> Callable[[], None]: ...


class SchedulerSource(Producer, Protocol):
    """The scheduler's producer (distcore.jobs.slurm_states.SlurmStates): told which jobs the
    logdirs name, it answers with its cached states (never waiting for the scheduler)."""

    def track(self, job_ids: Iterable[str]) -> None: ...
    def states(self) -> Mapping[str, SchedulerState]: ...


def errors_of(producers: Iterable[Producer]) -> tuple[ProducerError, ...]:
    """The producers' current failures, in order."""
    found: list[ProducerError] = []
    for producer in producers:
        try:
            found += tuple(producer.errors())
        except Exception as err:  # a producer's bug is one more error, never the index's end
            name = type(producer).__name__
            found.append(ProducerError(name, f"errors() failed: {err}", time.time()))
    return tuple(found)


def problems_of(producers: Iterable[Producer]) -> tuple[str, ...]:
    """The producers' source-level problems (a directory one cannot list, a FIFO named like an
    event file), one line each, in order."""
    found: list[str] = []
    for producer in producers:
        try:
            found += tuple(str(p) for p in producer.problems())
        except Exception as err:
            found.append(f"{type(producer).__name__}: problems() failed: {err}")
    return tuple(found)


def remote_hosts(sources: Iterable[HostSource]) -> list[Host]:
    """The hosts the sources see (remote GPUs); a source that fails is a host line saying so."""
    out: list[Host] = []
    for source in sources:
        try:
            out += source.hosts()
        except Exception as err:
            name = type(source).__name__
            out.append(Host(f"error:{name}", name, "ssh", error=f"{err}"))
    return out


def remote_records(sources: Iterable[AgentRecordSource]) -> dict[RunLocation, AgentRecord | None]:
    """The run.json records that remote readers read themselves."""
    found: dict[RunLocation, AgentRecord | None] = {}
    for source in sources:
        found.update(source.agent_records())
    return found


def scheduler_states(
    scheduler: SchedulerSource | None, agents: Iterable[AgentRecord]
) -> Mapping[str, SchedulerState]:
    """Tell the scheduler which Slurm jobs the jobs' run.json name; take its cached states.
    Never waits for the scheduler."""
    if scheduler is None:
        return {}
    scheduler.track(slurm_job_ids(agent.scheduler for agent in agents))
    return scheduler.states()
