"""The scheduler behind a job: run.json's `scheduler`, and what Slurm's answers mean for it.

distagent records which Slurm job (or Kubernetes pod) ran it; `SchedulerRef` is that record,
checked, and `SchedulerState` what Slurm says became of the job (distcore.jobs.slurm_states
asks, distcore.jobs.slurm_text parses the answers). The rules here are pure: when an ended job
has been over long enough to be believed, and when the step that ran distagent is gone while
the job goes on RUNNING (a batch script with more after srun, an salloc shell).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

# run.json is untrusted: only job ids and step ids of these forms ever reach a command.
JOB_ID_RE: Final = re.compile(r"[0-9]{1,12}\Z")
STEP_ID_RE: Final = re.compile(r"(?:[0-9]{1,9}|batch)\Z")
# Slurm's states in which the job is over (its processes are gone or going).
ENDED_STATES: Final = frozenset({
    "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
    "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT",
})


@dataclass(frozen=True)
class SchedulerRef:
    """run.json's `scheduler`, checked: every field a short string or None."""

    kind: str  # "slurm" or "kubernetes"
    job_id: str | None = None
    step_id: str | None = None
    node_list: str | None = None
    partition: str | None = None
    pod: str | None = None

    @property
    def slurm_job_id(self) -> str | None:
        """The job id when it is a Slurm job with a well-formed id (safe to pass to squeue)."""
        if self.kind == "slurm" and self.job_id is not None and JOB_ID_RE.match(self.job_id):
            return self.job_id
        return None


@dataclass(frozen=True)
class SchedulerState:
    job_id: str
    state: str  # Slurm's long name: PENDING, RUNNING, COMPLETED, CANCELLED, TIMEOUT, NODE_FAIL ...
    reason: str | None = None
    source: str = "squeue"
    # When the job ended (Slurm's EndTime, else when distmon first heard it); None while not.
    ended_at: float | None = None
    # The job's steps as `squeue --steps` listed them alive ("0", "batch" ...), each listing
    # with when it was asked (distmon's clock), oldest first; empty where not asked.
    listings: tuple[tuple[float, frozenset[str]], ...] = ()

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    @property
    def steps(self) -> frozenset[str] | None:
        return self.listings[-1][1] if self.listings else None

    @property
    def steps_at(self) -> float | None:
        return self.listings[-1][0] if self.listings else None


STEP_START_MARGIN: Final = 10.0  # seconds: the compute node's clock against distmon's (NTP)
# What Slurm says must have held this long before an alert: a shared filesystem shows run.json's
# last write late (NFS's attribute cache: 3 s for a file written often, 30 s for the directory
# a rename changed), and an agent that wrote `finished` must never be called dead meanwhile.
SETTLE_SECONDS: Final = 30.0


def ended_long_enough(state: SchedulerState | None, now: float) -> bool:
    """Slurm ended the job at least SETTLE_SECONDS ago (never with no end time: SlurmStates
    always gives one, Slurm's or when it first heard of the end)."""
    if state is None or not state.ended:
        return False
    return state.ended_at is not None and now - state.ended_at >= SETTLE_SECONDS


def step_gone(state: SchedulerState | None, step_id: str | None,
              started_at: float | None) -> bool:
    """True when Slurm's own listings show that the step which ran distagent has ended while the
    job runs: the job RUNNING, the step (a number, or `batch`) absent from every listing of the
    last SETTLE_SECONDS or more, all made after the step had started (run.json's `start_time`,
    plus a margin for the clocks). A listing from before the step began proves nothing, nor
    does a job or step without those facts, nor one listing alone (`--once`)."""
    if state is None or state.state != "RUNNING" or not state.listings:
        return False
    if step_id is None or not STEP_ID_RE.match(step_id) or started_at is None:
        return False
    since = None
    for at, live in reversed(state.listings):
        if step_id in live or at < started_at + STEP_START_MARGIN:
            break
        since = at
    newest = state.listings[-1][0]
    return since is not None and newest - since >= SETTLE_SECONDS


def _short(value: Any, limit: int = 256) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value)
    return text[:limit] if text else None


def scheduler_ref_from(value: Any) -> SchedulerRef | None:
    """run.json's `scheduler` object, or None when absent or not an object with a kind."""
    if not isinstance(value, dict):
        return None
    kind = _short(value.get("kind"), 32)
    if kind is None:
        return None
    return SchedulerRef(
        kind=kind,
        job_id=_short(value.get("job_id"), 64),
        step_id=_short(value.get("step_id"), 64),
        node_list=_short(value.get("node_list")),
        partition=_short(value.get("partition")),
        pod=_short(value.get("pod")),
    )


def describe_scheduler(ref: SchedulerRef, state: SchedulerState | None) -> str:
    """One line for a job's detail, e.g. `Slurm job 12 step 0 on node[1-2] (partition gpu):
    RUNNING`; not escaped (the front end escapes it)."""
    if ref.kind == "slurm":
        step = f" step {ref.step_id}" if ref.step_id else ""
        nodes = f" on {ref.node_list}" if ref.node_list else ""
        part = f" (partition {ref.partition})" if ref.partition else ""
        known = "state unknown" if state is None else state.state
        if state is not None and state.reason:
            known += f", {state.reason}"
        return f"Slurm job {ref.job_id or '?'}{step}{nodes}{part}: {known}"
    where = f" pod {ref.pod}" if ref.pod else ""
    return f"{ref.kind}{where}"


def slurm_job_ids(refs: Iterable[SchedulerRef | None]) -> list[str]:
    return [r.slurm_job_id for r in refs if r is not None and r.slurm_job_id is not None]
