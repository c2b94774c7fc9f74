"""Which critical alerts `distmon --once --check` fails on: an ended job's alerts are history.

A cron job that runs `--check` every few minutes must hear of a failed job once, not mail on
every run for as long as its logs are kept. So a job's critical alerts fail the check while the
job goes on, and for `within` seconds after it ended; alerts about no job (a host's GPUs) fail
it whenever they are raised. A job has ended when run.json says so (finished, failed, diverged,
stopped, hung), when Slurm does, or, with no run.json, when its files are idle or gone (a
TensorBoard run that stopped writing); it ended at the newest of run.json's `end_time`,
Slurm's end and its newest point. A job that ended at no known time stays counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from distcore.alerts import Alert, AlertKey
from distcore.jobs.snapshots import Job, JobsSnapshot

ENDED_STATUSES: Final = frozenset({"finished", "failed", "diverged", "stopped", "hung", "idle",
                                   "gone"})  # fmt: skip


def ended_at(job: Job) -> float | None:
    """When the job ended, or None while it goes on (or where no time says when)."""
    slurm = job.scheduler_state
    if job.status not in ENDED_STATUSES and not (slurm is not None and slurm.ended):
        return None
    times = [r.last_update for r in job.parts.values() if r.last_update is not None]
    end = job.agent.extra.get("end_time") if job.agent is not None else None
    if isinstance(end, int | float) and not isinstance(end, bool):
        times.append(float(end))
    if slurm is not None and slurm.ended_at is not None:
        times.append(slurm.ended_at)
    return max(times, default=None)


def _history(jobs: Iterable[Job], now: float, within: float) -> set[AlertKey]:
    """The keys of the alerts of jobs that ended more than `within` seconds before `now`."""
    old: set[AlertKey] = set()
    for job in jobs:
        end = ended_at(job)
        if end is not None and now - end > within:
            old.update(a.key for a in job.alerts)
    return old


def failing_alerts(snap: JobsSnapshot, within: float) -> tuple[Alert, ...]:
    """The critical alerts that fail `--check` at the snapshot's time (see the module's text)."""
    old = _history(snap.jobs, snap.generated_at, within)
    return tuple(a for a in snap.alerts if a.severity == "critical" and a.key not in old)
