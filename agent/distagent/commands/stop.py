"""`distagent stop RUN_DIR [--timeout S]`: SIGTERM to the run's process, then wait for it.

The pid comes from run.json, which anyone who can write the logdir can write: it is signalled
only when proven to be this run (`rundir.prove_process`: a positive integer pid, alive,
started at the recorded time, its environment's DISTAGENT_RUN_DIR naming this run directory;
a command line that merely contains the directory proves nothing).
Anything else is "not running", one line, exit 2: never a signal, never a traceback. The job
finishes its current step, saves a checkpoint, writes status `stopped` and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import time
from pathlib import Path

import psutil

from distagent.train.rundir import prove_process
from distcore import names
from distcore.errors import DistmonError
from distcore.jobs.agent import read_run_json, read_run_json_or_why
from distcore.textsafe import terminal_text

SHOWN = 200  # characters of an outside value (a path, a field of run.json) in a message


def run(args: argparse.Namespace) -> int:
    if not math.isfinite(args.timeout) or args.timeout < 0:
        raise DistmonError(f"--timeout: expected seconds >= 0, got {args.timeout}")
    run_dir = Path(args.run_dir)
    shown = terminal_text(run_dir, SHOWN)
    record, why = read_run_json_or_why(run_dir)
    if record is None:
        raise DistmonError(f"{shown}: no readable {names.RUN_JSON} ({terminal_text(why, SHOWN)}"
                           "; not a distagent run directory?)")
    status = record.get("status")
    if status != names.STATUS_RUNNING:
        print(f"{shown}: not running (status {terminal_text(status, SHOWN)})")
        return 0
    proof = prove_process(record, run_dir)
    if not isinstance(proof, psutil.Process):
        raise DistmonError(
            f"{shown}: not running: pid {terminal_text(record.get('pid'), 40)} is no longer this "
            f"run ({proof}); nothing signalled. `distagent start` resumes it from its checkpoint"
        )
    pid = proof.pid
    # psutil checks the pid was not reused since it was proven; gone since then is fine.
    with contextlib.suppress(psutil.NoSuchProcess):
        proof.send_signal(signal.SIGTERM)
    if not _wait_gone(pid, args.timeout):
        raise DistmonError(f"{shown}: pid {pid} still running after {args.timeout:g} s")
    final = read_run_json(run_dir) or {}
    print(f"{shown}: {terminal_text(final.get('status'), SHOWN)} at step "
          f"{terminal_text(final.get('last_step'), 40)}")
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
