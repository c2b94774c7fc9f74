"""What the job index hands out: immutable snapshots of jobs, hosts, alerts and producer errors.

The dashboard and `distmon --once` both render a `JobsSnapshot`; neither assembles jobs, hosts or
alerts itself. Every value here is frozen and holds only plain data (no open files, no threads),
so a snapshot can cross threads freely. `None` means unknown, never zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from distcore.alerts import Alert
from distcore.alerts.input_advice import PipelineFacts
from distcore.alerts.workers import WorkerBeat
from distcore.events.snapshots import RunSnapshot
from distcore.jobs.ledger import Ledger
from distcore.jobs.scheduler import SchedulerRef, SchedulerState
from distcore.location import RunLocation
from distcore.producer import ProducerError
from distcore.profile import ProfileError, ProfileSummary
from distcore.telemetry.samples import GpuDevice, TelemetrySnapshot

# The agent's statuses (run.json) where a job has one; otherwise the files' own.
# "unreadable": its run.json, or its files as the rules read them, could not be understood (the
# job's alert says why); every other job is judged as ever.
JobStatus = Literal[
    "running", "finished", "failed", "diverged", "stopped", "hung", "died", "live", "idle", "gone",
    "unreadable",
]
# Where a host's figures come from: this machine's NVML/psutil sampler, a `system/` sub-run in a
# watched logdir, or a remote host's `nvidia-smi` over SSH.
HostSourceKind = Literal["local", "logdir", "ssh"]


@dataclass(frozen=True)
class Host:
    """One machine (or one worker of a job) with its latest GPU and host figures."""

    key: str  # unique within a snapshot: "local", "logdir:<job>/system/worker-1", "ssh:gpu1"
    name: str  # as shown: the host name where known, else the key's readable part
    source: HostSourceKind
    worker: int | None = None  # a multi-worker job's task index
    job: str | None = None  # the job whose system/ run it came from (source "logdir")
    # Wall time of the latest sample on distmon's clock (a recorded sample's own time is moved
    # there by when distmon saw it change: jobs/clocks.py); age = now - sampled_at.
    sampled_at: float | None = None
    gpus: tuple[GpuDevice, ...] = ()
    gpu_reason: str | None = None  # why there are no GPUs / what is partly wrong
    simulated: bool = False
    cpu_percent: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    error: str | None = None  # e.g. "host unreachable since 12:03:04 (Connection refused)"
    interval_seconds: float | None = None  # how often it is sampled: "stale" is a few of these
    cpu_cores: int | None = None
    load_avg_1m: float | None = None
    machine: str | None = None  # the machine's host name where known (sampled or recorded)
    gpm_reason: str | None = None  # why some GPUs have no GPM activity counters (said once)
    refused: bool = False  # it sent more than the caps allow (gpu_reason says which): unsampled


class HostSource(Protocol):
    """A producer of hosts other than the local sampler (e.g. a remote nvidia-smi over SSH).
    Plain class with start()/close(); `hosts()` is cheap and thread-safe."""

    def start(self) -> None: ...
    def close(self) -> None: ...
    def hosts(self) -> tuple[Host, ...]: ...


@dataclass(frozen=True)
class Prices:
    """USD per GPU-hour and per kWh; None: not given."""

    gpu_hour: float | None = None
    kwh: float | None = None


@dataclass(frozen=True)
class AgentRecord:
    """What distagent's run.json says about a job (every field optional: it is untrusted)."""

    status: str | None = None
    replicas: int | None = None
    global_batch_size: int | None = None
    learning_rate: str | None = None  # provenance line, e.g. "0.01 @ batch 32 × 4 replicas ..."
    last_step: int | None = None
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    scheduler: SchedulerRef | None = None  # the Slurm job (or Kubernetes pod) that ran it
    recoveries: tuple[RecoveryNote, ...] = ()
    """Rollbacks after divergence (distagent's `recoveries`), the well-formed ones."""
    # The plan and config as comparison columns (lr, lr_rule, global_batch, replicas, model,
    # optimizer, ...): numbers and strings only, see distcore.jobs.agent.agent_hparams.
    hparams: Mapping[str, float | int | str] = field(default_factory=dict)
    mixed_precision: bool | None = None
    """The plan's train.mixed_precision (float16 compute: tensor cores are its work)."""
    workers: tuple[WorkerBeat, ...] = ()
    """Each worker's heartbeat (run.json's `workers`, distcore.jobs.workers)."""
    ledger: Ledger | None = None  # where the job's wall time went (distcore.jobs.ledger)
    pipeline: PipelineFacts | None = None  # its input pipeline, for the input-bound advice
    prices: Prices = Prices()  # its config's `[cost]`: USD per GPU-hour and per kWh
    unreadable: str | None = None
    """Why run.json could not be understood (every other field is then unknown); None when it
    was."""


@dataclass(frozen=True)
class RecoveryNote:
    """One rollback as run.json lists it: the diverged step and the rates before and after."""

    step: int
    lr_before: float | None = None
    lr_after: float | None = None
    restored_step: int | None = None


@dataclass(frozen=True)
class Job:
    """One row of the dashboard: a job and its parts.

    parts: "" (a lone run), "train", "validation", "system", "system/worker-<i>" -> the reader's
    run snapshot. `version` changes whenever any input of the job changed (used to keep alerts).
    """

    name: str
    directory: RunLocation | None  # where run.json would be
    parts: Mapping[str, RunSnapshot]
    status: JobStatus
    agent: AgentRecord | None
    hosts: tuple[Host, ...]
    alerts: tuple[Alert, ...]
    version: int = 0
    scheduler_state: SchedulerState | None = None  # what Slurm says of the job, where it answers
    # Its latest TensorFlow profile (distcore.jobs.profiles), or why it could not be read.
    profile: ProfileSummary | ProfileError | None = None


@dataclass(frozen=True)
class JobsSnapshot:
    """Everything both front ends show, at one instant."""

    generated_at: float
    logdirs: tuple[str, ...]
    jobs: tuple[Job, ...]
    hosts: tuple[Host, ...]  # the local host first, then every other host/worker seen
    alerts: tuple[Alert, ...]  # every alert, most severe first
    errors: tuple[ProducerError, ...] = ()
    problems: tuple[str, ...] = ()  # logdir-level problems (an unreadable directory, ...)
    # This machine's sampled history per metric name (distcore.names), oldest first.
    local_history: Mapping[str, tuple[float | None, ...]] = field(default_factory=dict)
    local_telemetry: TelemetrySnapshot | None = None  # this machine's latest sample, whole
    # USD per GPU-hour and per kWh from distmon's flags (None: not given): what jobs cost.
    price_gpu_hour: float | None = None
    price_kwh: float | None = None
