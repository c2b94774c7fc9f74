"""`distagent profile RUN_DIR [--steps N] [--timeout S]`: profile a running job's next N steps.

It asks through a request file in the run directory (train/profile_request.py), which the job's
chief takes at its next log point, so it reaches a job on any host that shares the directory
(Slurm) as it reaches a local one. It waits for the job's answer and prints the new profile's
path (under the run's `train/plugins/profile/`, where distmon shows it). No such run, a job
that is not running or ends first, a job that took no profile, or no answer in time: one line,
exit 2, and an unanswered request is taken back.
"""

from __future__ import annotations

import argparse
import math
import socket
import time
import uuid
from pathlib import Path

import psutil

from distagent.train.profile_request import (
    MAX_STEPS,
    Request,
    read_answer,
    withdraw,
    write_request,
)
from distagent.train.rundir import prove_process
from distcore import names
from distcore.errors import DistmonError
from distcore.jobs.agent import read_run_json, read_run_json_or_why
from distcore.textsafe import terminal_text

SHOWN = 200  # characters of an outside value (a path, a field of run.json) in a message
POLL_S = 0.2


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.steps <= MAX_STEPS:
        raise DistmonError(f"--steps: expected an integer from 1 to {MAX_STEPS}, got {args.steps}")
    if not math.isfinite(args.timeout) or args.timeout <= 0:
        raise DistmonError(f"--timeout: expected seconds > 0, got {args.timeout}")
    run_dir = Path(args.run_dir)
    shown = terminal_text(run_dir, SHOWN)
    _refuse_unless_running(run_dir, shown)
    request = Request(uuid.uuid4().hex, args.steps)
    try:
        write_request(run_dir, request)
    except OSError as err:
        raise DistmonError(f"{shown}: cannot ask for a profile: {err.strerror or err}") from None
    try:
        path = _wait(run_dir, shown, request.id, args.timeout)
    except BaseException:
        withdraw(run_dir, request.id)
        raise
    print(terminal_text(path, 4096))
    return 0


def _refuse_unless_running(run_dir: Path, shown: str) -> None:
    record, why = read_run_json_or_why(run_dir)
    if record is None:
        raise DistmonError(f"{shown}: no such run (no readable {names.RUN_JSON}: "
                           f"{terminal_text(why, SHOWN)})")
    status = record.get("status")
    if status != names.STATUS_RUNNING:
        raise DistmonError(f"{shown}: not running (status {terminal_text(status, SHOWN)}); "
                           "only a running job can be profiled")
    # A job on another host (Slurm) cannot be looked at from here: its answer will tell.
    if record.get("host") == socket.gethostname():
        proof = prove_process(record, run_dir)
        if not isinstance(proof, psutil.Process):
            raise DistmonError(f"{shown}: not running (pid {terminal_text(record.get('pid'), 40)}"
                               f" is no longer this run: {proof})")


def _wait(run_dir: Path, shown: str, request_id: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        # The status first: a job answers before it ends, so an ended job's answer is seen.
        status = (read_run_json(run_dir) or {}).get("status")
        answer = read_answer(run_dir, request_id)
        if answer is not None:
            if answer.path is None:
                raise DistmonError(f"{shown}: no profile: "
                                   f"{terminal_text(answer.error or 'no reason given', SHOWN)}")
            return answer.path
        if status != names.STATUS_RUNNING:
            raise DistmonError(f"{shown}: the job ended (status {terminal_text(status, SHOWN)})"
                               " before it took the profile")
        if time.monotonic() >= deadline:
            raise DistmonError(f"{shown}: no profile after {timeout:g} s (the job takes a "
                               "request at its next log point; is it still stepping?)")
        time.sleep(POLL_S)
