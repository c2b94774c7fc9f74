"""`distagent start CONFIG [--set k=v] [--detach]`: train (or resume) a job.

Foreground: a progress line on a terminal, plain log lines otherwise; exit 0 when the run
finished or was stopped by a signal, 1 when it diverged. `--detach` re-runs the same command in a
new session with its output in `<run dir>/output.log`, waits until the job has written its
run.json, and prints the run directory.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from distagent.config import load_config
from distagent.train.rundir import read_run_json, run_dir_for
from distcore import names
from distcore.errors import DistmonError

OUTPUT_LOG = "output.log"
DETACH_WAIT_SECONDS = 120.0


def run(args: argparse.Namespace) -> int:
    cfg = load_config(Path(args.config), args.overrides)
    run_dir = run_dir_for(cfg.run.logdir, cfg.run.name)
    if args.detach:
        return _detach(args, run_dir)
    from distagent.train import run_job
    from distagent.train.progress import Progress

    if cfg.strategy.kind == "multi_worker":  # the cluster, and a lost peer named in one line
        from distagent.cluster.worker import run_worker

        status = run_worker(cfg, run_dir=run_dir, task_index=args.task_index, progress=Progress())
    else:
        status = run_job(cfg, run_dir=run_dir, cluster=_cluster_for(args), progress=Progress())
    return 0 if status in (names.STATUS_FINISHED, names.STATUS_STOPPED) else 1


def _cluster_for(args: argparse.Namespace) -> Any:
    """What `run_job` hands to the multi-worker resolver: this worker's --task-index, if any."""
    return getattr(args, "task_index", None)


def child_command(args: argparse.Namespace) -> list[str]:
    command = [sys.executable, "-m", "distagent", "start", str(args.config)]
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
    with open(log_path, "ab") as log:
        child = subprocess.Popen(
            child_command(args), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in this terminal must not reach the job
        )
    deadline = time.monotonic() + DETACH_WAIT_SECONDS
    while time.monotonic() < deadline:
        record = read_run_json(run_dir)
        if record and record.get("pid") == child.pid:
            print(run_dir)
            return 0
        code = child.poll()
        if code is not None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or [""]
            raise DistmonError(f"the job exited with code {code} before starting: {tail[0]}")
        time.sleep(0.2)
    print(run_dir)
    print(f"distagent: pid {child.pid} has not written {names.RUN_JSON} yet; see {log_path}",
          file=sys.stderr)
    return 0
