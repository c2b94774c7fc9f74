"""The run directory and its `run.json`: what a run is, where it stands, and which process runs it.

`run.json` is rewritten whole, atomically (a temporary file in the same directory, then
`os.replace`), so a reader never sees half a file. The pid is recorded with the process's start
time: pids are reused, and `distagent stop` signals only the process that is still this run.
No TensorFlow here: `distagent status` and `stop` read run directories without it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil

from distcore import names


def run_dir_for(logdir: str | Path, run_name: str) -> Path:
    return Path(logdir) / run_name


def process_identity(pid: int | None = None) -> dict[str, Any]:
    """pid, host and the process's start time (psutil's create_time, seconds since the epoch)."""
    proc = psutil.Process(pid or os.getpid())
    return {"pid": proc.pid, "host": socket.gethostname(), "pid_create_time": proc.create_time()}


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(data, out, indent=2, sort_keys=True, default=str)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_run_json(run_dir: Path) -> dict[str, Any] | None:
    """The run's record, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads((run_dir / names.RUN_JSON).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class RunRecord:
    """Owns `<run_dir>/run.json` for one process: updates merge into the record and rewrite it."""

    def __init__(self, run_dir: Path, initial: Mapping[str, Any], *, enabled: bool = True) -> None:
        self.path = run_dir / names.RUN_JSON
        self.data: dict[str, Any] = dict(initial)
        self.enabled = enabled  # False on non-chief workers: they never write the record
        self._last_write = 0.0

    def update(self, *, throttle_s: float = 0.0, **fields: Any) -> None:
        """Merge `fields`; write now unless the last write is younger than `throttle_s`."""
        self.data.update(fields)
        now = time.monotonic()
        if not self.enabled or (throttle_s and now - self._last_write < throttle_s):
            return
        write_json_atomic(self.path, self.data)
        self._last_write = now


def find_runs(logdir: Path, max_depth: int = 3) -> Iterator[Path]:
    """Run directories (those holding a run.json) under `logdir`, including logdir itself."""
    logdir = Path(logdir)
    if (logdir / names.RUN_JSON).is_file():
        yield logdir
    if max_depth <= 0 or not logdir.is_dir():
        return
    for child in sorted(p for p in logdir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if child.name in (names.TRAIN_DIR, names.VALIDATION_DIR, names.SYSTEM_DIR,
                          names.CHECKPOINT_DIR):
            continue
        yield from find_runs(child, max_depth - 1)


def is_same_process(record: Mapping[str, Any]) -> bool:
    """True when the recorded pid is alive, started when recorded, and runs distagent."""
    pid, created = record.get("pid"), record.get("pid_create_time")
    if not isinstance(pid, int) or not isinstance(created, int | float):
        return False
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - float(created)) > 0.5:
            return False
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return "distagent" in " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
