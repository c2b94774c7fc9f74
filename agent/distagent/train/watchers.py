"""What watches a job from inside: its ledger's clock, its heartbeat, its system samplers.

Each is made here for run_job, and none of them under the benchmarks' switch (bare.py), where
the clock measures nothing and there is no heartbeat and no sampler.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from distagent.devices import StrategySetup
from distagent.schema import ClusterConfig, TelemetryConfig
from distagent.train.bare import IdleClock, is_bare
from distagent.train.heartbeat import HangSettings, Heartbeat
from distagent.train.ledger import AttemptClock, start_clock
from distagent.train.phases import PhaseProbe
from distagent.train.rundir import RunRecord
from distcore import names
from distcore.jobs.agent import read_run_json


def job_clock(run_dir: Path, checkpointer: Any, task_index: int,
              entered: float | None) -> AttemptClock:
    """This attempt's ledger (ledger.start_clock); one that measures nothing when bare."""
    if is_bare():
        return IdleClock()
    return start_clock(run_dir, checkpointer, task_index, entered=entered)


@contextlib.contextmanager
def system_recorder(
    run_dir: Path, setup: StrategySetup, telemetry: TelemetryConfig
) -> Iterator[None]:
    """This worker's system and GPU samples while the block runs; none when bare."""
    if is_bare():
        yield
        return
    from distagent.system_record import SystemRecorder

    several = setup.workers > 1
    subdir = names.worker_system_dir(setup.task_index) if several else names.SYSTEM_DIR
    # A resumed run keeps counting from its first start, so earlier samples are not superseded.
    origin = (read_run_json(run_dir) or {}).get("first_start_time")
    recorder = SystemRecorder(
        run_dir, interval=telemetry.interval_seconds, subdir=subdir, pids=[os.getpid()],
        origin=origin if isinstance(origin, int | float) else None,
        simulate_gpus=telemetry.simulate_gpus, worker=setup.task_index if several else None,
    )
    recorder.start()
    try:
        yield
    finally:
        recorder.close()


def heartbeat(
    run_dir: Path, setup: StrategySetup, cluster_config: ClusterConfig, *, is_chief: bool,
    read: Callable[[], tuple[int, int]], record: RunRecord, cluster: Any = None,
) -> contextlib.AbstractContextManager[Heartbeat | None]:
    """This worker's heartbeat (None when bare); the chief's also keeps run.json's `workers`
    and, on an abort for a hang, ends run.json `hung` (the other workers exit the same way, on
    their own). `read`: (the step reduced, the step reached), from the step's variables."""
    if is_bare():
        return contextlib.nullcontext(None)

    def abort(message: str, step: int) -> None:
        record.update(status=names.STATUS_HUNG, last_step=step, end_time=time.time(),
                      message=message, error=message, error_step=None)

    def leave(code: int) -> None:  # the chief last, as at a job's end (commands/worker.py)
        from distagent.cluster.leave import leave_after_peers

        cluster_setup = getattr(cluster, "setup", None)
        if cluster_setup is None:
            os._exit(code)
        leave_after_peers(cluster_setup, code)

    return Heartbeat(
        run_dir, worker=setup.task_index, workers=setup.workers,
        settings=HangSettings(hang_seconds=cluster_config.hang_seconds,
                              on_hang=cluster_config.on_hang,
                              lost_seconds=cluster_config.timeout_seconds),
        probe=PhaseProbe(read), on_abort=abort, is_chief=is_chief,
        publish=lambda workers: record.update(workers=workers), exit_process=leave,
    )
