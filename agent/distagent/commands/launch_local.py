"""`distagent launch-local CONFIG --workers N`: a multi-worker job as N processes on this machine.

Each worker is `distagent start CONFIG --task-index I` with `[cluster] workers` set to N free
ports on 127.0.0.1: the workers talk over loopback. (TensorFlow itself listens on all interfaces
whatever the address; its ports carry no authentication: see docs/across_machines.md.) Their
output comes through here, each line prefixed with the worker's index; SIGINT and SIGTERM are
passed on to every worker (each checkpoints and stops). The exit code is 0 when every worker
exits 0; otherwise 1, with one line per failed worker naming it. A chief that died without
ending its run.json (a signal: SIGKILL, or SIGABRT from inside TensorFlow) leaves it `running`;
the launcher, which saw how each worker ended, ends it `failed` with that line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from distagent.cluster.strategy import environ_without_cluster
from distagent.config import load_config
from distagent.train.rundir import run_dir_for, write_json_atomic
from distcore import names
from distcore.errors import DistmonError
from distcore.jobs.agent import read_run_json
from distcore.wording import counted

LOOPBACK = "127.0.0.1"
GRACE_SECONDS = 30.0
"""After the first worker fails, how much longer than the cluster timeout the others get."""


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """`count` distinct ports the kernel says are free now (held open together, then released)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]


def worker_overrides(ports: Sequence[int]) -> list[str]:
    addresses = json.dumps([f"{LOOPBACK}:{port}" for port in ports])
    return ['strategy.kind="multi_worker"', f"cluster.workers={addresses}"]


def worker_command(config: str, overrides: Sequence[str], task_index: int) -> list[str]:
    command = [sys.executable, "-m", "distagent", "start", config]
    for override in overrides:
        command += ["--set", override]
    return [*command, "--task-index", str(task_index)]


def describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


class Workers:
    """The worker processes and the threads that copy their output, prefixed, to `out`."""

    def __init__(self, commands: Sequence[list[str]], env: dict[str, str], out: IO[str]) -> None:
        self.out = out
        self._lock = threading.Lock()
        self.procs = [
            subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace",
                             start_new_session=True)  # signals reach them only through us
            for cmd in commands
        ]
        self._threads = [
            threading.Thread(target=self._copy, args=(i, p.stdout), name=f"worker-{i}-output")
            for i, p in enumerate(self.procs)
        ]
        for thread in self._threads:
            thread.start()

    def _copy(self, index: int, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            with self._lock:
                self.out.write(f"[worker {index}] {line}")
                self.out.flush()
        stream.close()

    def signal_all(self, signum: int) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signum)

    def wait(self, linger_seconds: float) -> list[int]:
        """Wait for all; once one fails, the rest get `linger_seconds` to fail or finish."""
        deadline: float | None = None
        # Every worker polled each time (a short-circuit stopped at the first still running: a
        # dead worker behind a live chief went unnoticed, and the linger never started).
        while None in [p.poll() for p in self.procs]:
            failed = any(p.returncode not in (None, 0) for p in self.procs)
            if failed and deadline is None:
                deadline = time.monotonic() + linger_seconds
            if deadline is not None and time.monotonic() > deadline:
                self.signal_all(signal.SIGKILL)
            time.sleep(0.1)
        return [int(p.returncode) for p in self.procs]

    def close(self) -> None:
        self.signal_all(signal.SIGKILL)
        for proc in self.procs:
            proc.wait()
        for thread in self._threads:
            thread.join()


@contextlib.contextmanager
def forwarded_signals(workers: Workers) -> Iterator[None]:
    """SIGINT/SIGTERM here become SIGTERM to every worker (a clean, checkpointed stop)."""
    def forward(signum: int, frame: Any) -> None:
        workers.signal_all(signal.SIGTERM)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise DistmonError(f"--workers: expected 1 or more, got {args.workers}")
    overrides = [*args.overrides, *worker_overrides(free_ports(args.workers))]
    cfg = load_config(Path(args.config), overrides)  # refuse a bad config once, not N times
    env = environ_without_cluster(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's INFO lines, N times over, hide ours
    commands = [worker_command(args.config, overrides, i) for i in range(args.workers)]
    print(f"launch-local: {counted(args.workers, 'worker')} on "
          f"{', '.join(cfg.cluster.workers)}",
          file=sys.stderr)
    workers = Workers(commands, env, sys.stdout)
    try:
        with forwarded_signals(workers):
            codes = workers.wait(cfg.cluster.timeout_seconds + GRACE_SECONDS)
    finally:
        workers.close()
    failed = [f"worker {i} ({cfg.cluster.workers[i]}) failed: {describe_exit(c)}"
              for i, c in enumerate(codes) if c != 0]
    for line in failed:
        print(f"launch-local: {line}", file=sys.stderr)
    if failed:
        end_unended_record(run_dir_for(cfg.run.logdir, cfg.run.name), workers.procs[0].pid,
                           "; ".join(failed))
    return 1 if failed else 0


def end_unended_record(run_dir: Path, chief_pid: int, error: str) -> bool:
    """End run.json `failed` with `error` when it still says `running` for our chief (which
    died without writing it); True when it did. Another process's record is left alone."""
    record = read_run_json(run_dir)
    if not record or record.get("status") != names.STATUS_RUNNING \
            or record.get("pid") != chief_pid:
        return False
    step = record.get("last_step")
    record.update(status=names.STATUS_FAILED, end_time=time.time(), error=error,
                  error_step=step if isinstance(step, int) else None)
    write_json_atomic(run_dir / names.RUN_JSON, record)
    return True
