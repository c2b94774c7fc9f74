"""What became of a job, as distagent's run.json and the scheduler tell it: diverged, failed or
stopped; rolled back after a divergence; or an agent that died without writing its end."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from distcore import names
from distcore.alerts import Alert


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


def unreadable(job: str, why: str, since: float | None) -> Alert:
    """A job whose run.json, or whose files as the rules read them, could not be understood:
    said on its own row, while every other job is judged as ever."""
    return Alert("unreadable", "warning", job, f"could not be understood: {why}", since)


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
    if status == names.STATUS_HUNG:
        return Alert("hung", "critical", job, f"job ended hung{at}{why}", since)
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


def agent_process_gone(job: str, pid: object, host: object, since: float | None) -> Alert:
    """run.json still says running but its process on this machine is gone
    (distcore.jobs.liveness.process_gone): killed, or it died without writing its end."""
    return Alert("agent_died", "critical", job,
                 f"run.json still says running but its process (pid {pid} on {host}) is gone: "
                 "the agent died without writing its end (killed, out of memory, a disk it "
                 "could not write); `distagent start` on its config resumes it", since)


def agent_step_gone(job: str, job_id: str, step_id: str, since: float | None) -> Alert:
    """The job still runs but the job step that ran distagent has ended, while run.json still
    says running (distcore.jobs.scheduler.step_gone decides it from squeue's listing)."""
    return Alert("agent_died", "critical", job,
                 f"Slurm job {job_id} is RUNNING but its step {step_id}, which ran distagent, "
                 "has ended while run.json still says running: the agent died without a word "
                 "(killed, out of memory); see the job's output file", since)
