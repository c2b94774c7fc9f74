"""run.json for run_job: the record a job starts with, and each way it ends."""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

from distagent.config import config_to_dict
from distagent.plan import Plan
from distagent.schema import JobConfig
from distagent.train.failure import error_line
from distagent.train.ledger import AttemptClock
from distagent.train.loop import Outcome
from distagent.train.rundir import RunRecord, process_identity
from distagent.train.summaries import Writers
from distcore import names
from distcore.errors import DistmonError, StorageError, storage_problem
from distcore.jobs.agent import read_run_json


def initial_record(
    cfg: JobConfig, plan: Plan, run_dir: Path, resumed: str | None
) -> dict[str, Any]:
    previous = read_run_json(run_dir) or {}
    now = time.time()
    return {
        # The first session's start survives resumes; start_time is this session's.
        "first_start_time": previous.get("first_start_time", now) if resumed else now,
        "metrics": previous.get("metrics") or {} if resumed else {},
        # Rollbacks after divergence (recovery.py); a resumed run keeps counting its own.
        "recoveries": previous.get("recoveries") or [] if resumed else [],
        **process_identity(),
        "run_dir": str(run_dir.resolve()),
        "name": cfg.run.name,
        "status": names.STATUS_RUNNING,
        "config": config_to_dict(cfg),
        "plan": plan.to_json(),
        "start_time": now,
        "end_time": None,
        "last_step": None,
        "total_steps": plan.total_steps,
        "resumed_from": resumed,
        "error": None,
        "error_step": None,  # diverged: the first non-finite loss; failed: the step reached
        "message": None,
    }


def refused(cfg: JobConfig, plan: Plan, run_dir: Path, *, is_chief: bool,
            checkpoint: str | None, error: str, clock: AttemptClock) -> None:
    """run.json says `failed` with the one line the user sees, keeping the last step reached."""
    initial = initial_record(cfg, plan, run_dir, checkpoint)
    reached = (read_run_json(run_dir) or {}).get("last_step")
    step = reached if isinstance(reached, int) and not isinstance(reached, bool) else 0
    record = RunRecord(run_dir, initial, enabled=is_chief)
    finish(record, Outcome(names.STATUS_FAILED, step, None), error=error, clock=clock)


def failed(err: BaseException, at: int, record: RunRecord, writers: Writers,
           clock: AttemptClock, cluster: Any = None) -> None:
    """run.json ends `failed` with the error's one line. A refused write (a full disk) ends as
    StorageError, one line, rather than TensorFlow's traceback; so does a run.json that cannot
    record the end, naming both causes."""
    line = error_line(err, cluster)
    try:
        finish(record, Outcome(names.STATUS_FAILED, at, None, error_step=at),
               error=line, trace=traceback.format_exc(), clock=clock)
    except StorageError as unrecorded:
        raise StorageError(f"{line}; {unrecorded}") from None
    finally:
        try:  # the events' last flush meets the same full disk: the cause is said above
            writers.close()
        except Exception:
            if storage_problem(err) is None:
                raise
        finally:
            clock.close()
    if not isinstance(err, DistmonError) and storage_problem(err) is not None:
        raise StorageError(line) from None


def finish(record: RunRecord, outcome: Outcome, *, clock: AttemptClock,
           error: str | None = None, trace: str | None = None) -> None:
    """The final record, written now; the record's writing thread ended."""
    try:
        record.update(status=outcome.status, last_step=outcome.step, end_time=time.time(),
                      message=outcome.message, error=error, error_step=outcome.error_step,
                      traceback=trace, **clock.save(outcome.step))
    finally:
        record.close()
