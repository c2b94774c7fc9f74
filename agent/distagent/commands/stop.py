"""`distagent stop RUN_DIR [--timeout S]`: SIGTERM to the run's process, then wait for it.

The pid comes from run.json, and is signalled only if it is still that run: alive, started at
the recorded time (psutil's create_time; pids are reused) and running distagent. The job
finishes its current step, saves a checkpoint, writes status `stopped` and exits.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

import psutil

from distagent.train.rundir import is_same_process, read_run_json
from distcore import names
from distcore.errors import DistmonError


def run(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    record = read_run_json(run_dir)
    if record is None:
        raise DistmonError(f"{run_dir}: no {names.RUN_JSON} (not a distagent run directory?)")
    status = record.get("status")
    if status != names.STATUS_RUNNING:
        print(f"{run_dir}: not running (status {status})")
        return 0
    if not is_same_process(record):
        raise DistmonError(
            f"{run_dir}: pid {record.get('pid')} is no longer this run (it died without "
            "writing a final status); `distagent start` resumes it from its checkpoint"
        )
    pid = int(record["pid"])
    os.kill(pid, signal.SIGTERM)
    if not _wait_gone(pid, args.timeout):
        raise DistmonError(f"{run_dir}: pid {pid} still running after {args.timeout:g} s")
    final = read_run_json(run_dir) or {}
    print(f"{run_dir}: {final.get('status')} at step {final.get('last_step')}")
    return 0


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False
