"""`distagent start CONFIG [--set k=v] [--detach]`: train (or resume) a job.

Foreground: a progress line on a terminal, plain log lines otherwise; exit 0 when the run
finished or was stopped by a signal, 1 when it diverged. `--detach` re-runs the same command in a
new session with its output in `<run dir>/output.log`, waits until the job has written its
run.json, and prints the run directory.

Before TensorFlow loads, a job proves who it is: its environment must name its run directory
(`rundir.RUN_DIR_ENV`, read back by `stop` and `status` from /proc), and a process's environment
there is fixed at exec, so `start` re-executes itself once with it (same pid, same start time).
A user model ("module:function") is imported from the current directory first, then PYTHONPATH
and installed packages, in the foreground and with `--detach` alike (see `user_code_path`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from distagent.config import load_config
from distagent.train.rundir import RUN_DIR_ENV, run_dir_for
from distcore import names
from distcore.errors import DistmonError
from distcore.jobs.agent import read_run_json
from distcore.safefile import open_write, read_tail
from distcore.textsafe import terminal_text

OUTPUT_LOG = "output.log"
DETACH_WAIT_SECONDS = 120.0


def run(args: argparse.Namespace) -> int:
    cfg = load_config(Path(args.config), args.overrides)
    run_dir = run_dir_for(cfg.run.logdir, cfg.run.name)
    if args.detach:
        return _detach(args, run_dir)
    if getattr(args, "from_command_line", False):
        _exec_with_identity(run_dir)
    user_code_path(cfg.model.name)
    from distagent.train import run_job
    from distagent.train.ledger import claim_process
    from distagent.train.progress import Progress

    claim_process()
    if cfg.strategy.kind == "multi_worker":  # the cluster, and a lost peer named in one line
        from distagent.commands.worker import run_worker

        # From a command line the process ends in run_worker, in order with the other workers.
        leave = _exit_code if getattr(args, "from_command_line", False) else None
        status = run_worker(cfg, run_dir=run_dir, task_index=args.task_index, progress=Progress(),
                            exit_code=leave)
    else:
        new = not os.path.lexists(run_dir)
        try:
            status = run_job(cfg, run_dir=run_dir, cluster=_cluster_for(args),
                             progress=Progress())
        except DistmonError:
            if new:
                _remove_unrecorded(run_dir)
            raise
    return _exit_code(status)


def _exit_code(status: str) -> int:
    return 0 if status in (names.STATUS_FINISHED, names.STATUS_STOPPED) else 1


def _remove_unrecorded(run_dir: Path) -> None:
    """A run directory this start created and that never got a run.json (the job was refused
    before training: a model that cannot take the data's shape, ...): without it, it would list
    as a live job. One with run.json is a record of the failure and stays."""
    if not os.path.lexists(run_dir / names.RUN_JSON):
        shutil.rmtree(run_dir, ignore_errors=True)


REEXEC_MARK_ENV = "_DISTAGENT_REEXECUTED_PID"


def _exec_with_identity(run_dir: Path) -> None:
    """Unless RUN_DIR_ENV already names `run_dir`, re-execute this command (same pid) with it
    set; returns only when nothing had to be done, or when exec failed (with a warning)."""
    want = str(run_dir.resolve())
    # Once per process at most, even if the config changed under us between the two reads
    # (the pid survives exec; a child inherits the mark but has another pid).
    if os.environ.get(RUN_DIR_ENV) == want or os.environ.get(REEXEC_MARK_ENV) == str(os.getpid()):
        return
    env = {**os.environ, RUN_DIR_ENV: want, REEXEC_MARK_ENV: str(os.getpid())}
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    except OSError as err:  # the job still runs; `stop` and `status` just cannot prove it
        print(f"distagent: warning: cannot re-execute with {RUN_DIR_ENV} ({err.strerror}); "
              "`distagent stop` will not recognise this run", file=sys.stderr)


def user_code_path(model_name: str) -> None:
    """A "module:function" model is user code, imported from the current directory first.

    The console script does not put the current directory on sys.path and `python -m` does;
    the detached child runs with -P (no implicit entry), so this is the one rule for all."""
    if ":" not in model_name:
        return
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def _cluster_for(args: argparse.Namespace) -> Any:
    """What `run_job` hands to the multi-worker resolver: this worker's --task-index, if any."""
    return getattr(args, "task_index", None)


def child_command(args: argparse.Namespace) -> list[str]:
    # -P: no implicit sys.path entry; `user_code_path` adds the current directory, as it does
    # in the foreground.
    command = [sys.executable, "-P", "-m", "distagent", "start", str(args.config)]
    if getattr(args, "verbose", False):
        command.append("--verbose")
    for override in args.overrides:
        command += ["--set", override]
    if getattr(args, "task_index", None) is not None:
        command += ["--task-index", str(args.task_index)]
    return command


def _detach(args: argparse.Namespace, run_dir: Path) -> int:
    run_dir.mkdir(parents=True, exist_ok=True)
    log_path = run_dir / OUTPUT_LOG
    try:  # a FIFO or link planted as output.log would block or redirect the job's output
        log_fd = open_write(log_path, how="append")
    except OSError as err:
        raise DistmonError(f"{terminal_text(log_path)}: cannot write the job's output "
                           f"({err.strerror or err})") from None
    with os.fdopen(log_fd, "ab") as log:
        child = subprocess.Popen(
            child_command(args), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, RUN_DIR_ENV: str(run_dir.resolve())},
            start_new_session=True,  # a Ctrl-C in this terminal must not reach the job
        )
    deadline = time.monotonic() + DETACH_WAIT_SECONDS
    while time.monotonic() < deadline:
        record = read_run_json(run_dir)
        if record and record.get("pid") == child.pid:
            print(terminal_text(run_dir))
            return 0
        code = child.poll()
        if code is not None:
            try:
                text = read_tail(log_path, 64 * 1024).decode(errors="replace")
            except OSError:
                text = ""
            tail = text.strip().splitlines()[-1:] or [""]
            raise DistmonError(f"the job exited with code {code} before starting: {tail[0]}")
        time.sleep(0.2)
    print(terminal_text(run_dir))
    print(terminal_text(f"distagent: pid {child.pid} has not written {names.RUN_JSON} yet; "
                        f"see {log_path}"),
          file=sys.stderr)
    return 0
