"""The run directory and its `run.json`: what a run is, where it stands, and which process runs it.

`run.json` is rewritten whole, atomically (a temporary file in the same directory, then
`os.replace`), so a reader never sees half a file. When that new file cannot be made (a full
disk, a directory that takes no new files), the record is written over the existing file, compact
and without its traceback, so that a job's end is recorded whatever the disk. The pid is
recorded with the process's start time: pids are reused, and `distagent stop` signals only the
process that is still this run. No TensorFlow here: `distagent status` and `stop` read run
directories without it.
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil

from distcore import names
from distcore.errors import STORAGE_ERRNOS, StorageError, storage_line
from distcore.jobs.liveness import CREATE_TIME_TOLERANCE_S
from distcore.safefile import rewrite_in_place, write_atomic


def run_dir_for(logdir: str | Path, run_name: str) -> Path:
    return Path(logdir) / run_name


def process_identity(pid: int | None = None) -> dict[str, Any]:
    """pid, host and the process's start time (psutil's create_time, seconds since the epoch),
    and the scheduler that started it (Slurm's job and step, Kubernetes' pod; None if none)."""
    from distagent.cluster.scheduler import scheduler_info

    proc = psutil.Process(pid or os.getpid())
    return {"pid": proc.pid, "host": socket.gethostname(), "pid_create_time": proc.create_time(),
            "scheduler": scheduler_info(os.environ)}


def thread_count() -> int | None:
    """This process's threads, TensorFlow's included (the kernel's list; threading sees only
    Python's); None where there is no /proc."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def threads_now() -> dict[str, Any]:
    """run.json's `threads`, measured as it is written (RunRecord's `at_write`)."""
    return {"threads": thread_count()}


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """run.json, replaced whole (`distcore.safefile.write_atomic`: a new file, never a link)."""
    text = json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"
    write_atomic(path, text.encode("utf-8", "surrogateescape"))


def write_json_in_place(path: Path, data: Mapping[str, Any]) -> None:
    """run.json (or a heartbeat) written over the existing file (`rewrite_in_place`): compact,
    and without its traceback when the whole would be longer than the file, whose blocks must
    hold it."""
    try:
        room = os.stat(path).st_size
    except OSError:
        room = 0
    doc = dict(data)
    text = json.dumps(doc, sort_keys=True, default=str, separators=(",", ":")) + "\n"
    if len(text) > room and doc.get("traceback") is not None:
        doc["traceback"] = None
        text = json.dumps(doc, sort_keys=True, default=str, separators=(",", ":")) + "\n"
    rewrite_in_place(path, text.encode("utf-8", "surrogateescape"))


WRITER_IDLE_S = 5.0
"""How long the thread that writes `later` records waits for the next before it ends."""


class RunRecord:
    """Owns `<run_dir>/run.json` for one process: updates merge into the record and rewrite it.

    `free_space`, called when the disk refuses run.json's new file, removes what the job can
    spare (its partial checkpoints) before the record is written over the old file instead.
    `at_write`, given, returns fields measured when the record is written (the process's
    threads), by whichever thread writes it."""

    def __init__(self, run_dir: Path, initial: Mapping[str, Any], *, enabled: bool = True,
                 free_space: Callable[[], None] | None = None,
                 at_write: Callable[[], Mapping[str, Any]] | None = None) -> None:
        self.path = run_dir / names.RUN_JSON
        self.data: dict[str, Any] = dict(initial)
        self.enabled = enabled  # False on non-chief workers: they never write the record
        self.free_space = free_space
        self.at_write = at_write
        self._last_write = 0.0
        self._lock = threading.Lock()  # the loop and the heartbeat (its `workers`) both update
        self._wake = threading.Condition(self._lock)  # a record taken `later`
        self._file = threading.Lock()  # one write at a time, the newest record never undone
        self._taken = 0  # records taken to be written, numbered
        self._written = 0  # the newest of them on disk
        self._pending: tuple[int, dict[str, Any]] | None = None
        self._thread: threading.Thread | None = None  # writes the records taken `later`
        self._closed = False
        self._error: BaseException | None = None

    def update(self, *, throttle_s: float = 0.0, later: bool = False, **fields: Any) -> None:
        """Merge `fields`; write now unless the last write is younger than `throttle_s`.
        `later`: a write that is due is made by a thread of its own and the caller goes on
        (a log point's: the rename of run.json's new file may take milliseconds); that
        thread's error is raised by the next `later` update, or cleared by a write made now."""
        with self._lock:
            if later:
                error, self._error = self._error, None
                if error is not None:
                    raise error
            self.data.update(fields)
            now = time.monotonic()
            if not self.enabled or (throttle_s and now - self._last_write < throttle_s):
                return
            self._last_write = now
            self._taken += 1
            taken = (self._taken, dict(self.data))
            if later and not self._closed:
                self._pending = taken
                if self._thread is not None:
                    self._wake.notify()
                else:  # started under load, a thread takes milliseconds: one kept a while
                    self._thread = threading.Thread(
                        target=self._write_pending, name="distagent-run-json", daemon=True)
                    self._thread.start()
                return
        self._write(*taken)
        with self._lock:
            self._error = None

    def _write(self, number: int, data: dict[str, Any]) -> None:
        with self._file:
            if number <= self._written:
                return  # a newer record is on disk already
            if self.at_write is not None:
                measured = self.at_write()
                data.update(measured)
                with self._lock:
                    self.data.update(measured)
            write_json_whatever_the_disk(self.path, data, self.free_space)
            self._written = number

    def _write_pending(self) -> None:
        """The newest record taken `later`, until none came for WRITER_IDLE_S or the record is
        closed; an error kept for the caller."""
        while True:
            with self._lock:
                if self._pending is None and not self._closed:
                    self._wake.wait(WRITER_IDLE_S)
                taken, self._pending = self._pending, None
                if taken is None:
                    self._thread = None
                    return
            try:
                self._write(*taken)
            except BaseException as err:  # raised on the caller's thread, never lost with this
                with self._lock:
                    self._error = err

    def close(self) -> None:
        """The writing thread ended, its last record written; later updates write at once."""
        with self._lock:
            self._closed = True
            self._wake.notify()
            thread = self._thread
        if thread is not None:
            thread.join()


def write_json_whatever_the_disk(path: Path, data: Mapping[str, Any],
                                 free_space: Callable[[], None] | None = None) -> None:
    """`write_json_atomic`; where the disk refuses its new file, `free_space()` and then
    `write_json_in_place`. StorageError, in one line, when neither takes it."""
    try:
        write_json_atomic(path, data)
        return
    except OSError as err:
        if err.errno not in STORAGE_ERRNOS:
            raise
        cause = err.errno
    if free_space is not None:
        free_space()
    try:
        write_json_in_place(path, data)
    except OSError as err:
        raise StorageError(f"{storage_line(cause, path.parent)}: {path} not updated "
                           f"({err.strerror or err})") from None


def find_runs(logdir: Path, max_depth: int = 3) -> Iterator[Path]:
    """Run directories (those holding a run.json) under `logdir`, including logdir itself. A
    run.json of any kind counts (a FIFO, a link, a directory: `status` says why it cannot be
    read rather than leave the run out); only a stat is made, nothing opened."""
    logdir = Path(logdir)
    if os.path.lexists(logdir / names.RUN_JSON):
        yield logdir
    if max_depth <= 0 or not logdir.is_dir():
        return
    try:  # an unreadable directory holds no runs we can show; the rest still list
        children = sorted(p for p in logdir.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return
    for child in children:
        if child.name in (names.TRAIN_DIR, names.VALIDATION_DIR, names.SYSTEM_DIR,
                          names.CHECKPOINT_DIR):
            continue
        yield from find_runs(child, max_depth - 1)


RUN_DIR_ENV = "DISTAGENT_RUN_DIR"
"""Set in a job's environment to its resolved run directory: the proof `stop` and `status` ask
of a process before they call it the run (`distagent start` re-executes itself with it)."""
# The start time's tolerance (CREATE_TIME_TOLERANCE_S) is loose; the run directory in the
# environment is what tells a reused pid apart.


def is_same_process(record: Mapping[str, Any], run_dir: Path) -> bool:
    """True only when the recorded process is proven to be this run (see `prove_process`)."""
    return isinstance(prove_process(record, run_dir), psutil.Process)


def process_mismatch(record: Mapping[str, Any], run_dir: Path) -> str | None:
    """None when run.json's pid is proven to be this run, else why not (see `prove_process`)."""
    proof = prove_process(record, run_dir)
    return None if isinstance(proof, psutil.Process) else proof


def prove_process(record: Mapping[str, Any], run_dir: Path) -> psutil.Process | str:
    """The run's process when run.json's pid is proven to be this run: a positive integer,
    alive, started at the recorded time (a finite number), and its environment names `run_dir`
    (RUN_DIR_ENV; never its command line). Otherwise why not, in a few words. Signal through
    the returned object: psutil refuses to signal a pid reused since it was looked at."""
    pid, created = record.get("pid"), record.get("pid_create_time")
    if type(pid) is not int or pid <= 0:
        return "its pid is not a positive integer"
    if not isinstance(created, int | float) or isinstance(created, bool) \
            or not math.isfinite(created):
        return "its start time is not a finite number"
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - float(created)) > CREATE_TIME_TOLERANCE_S:
            return "that pid started at another time"
        if proc.status() == psutil.STATUS_ZOMBIE:
            return "that process has exited"
        if not _names_run_dir(proc, run_dir):
            return "that process does not name this run directory"
    except psutil.NoSuchProcess:
        return "that process has exited"
    except (psutil.Error, OSError, ValueError, OverflowError):
        return "that process cannot be inspected"
    return proc


def _names_run_dir(proc: psutil.Process, run_dir: Path) -> bool:
    """Positive proof only: the process's environment (fixed at exec, see `distagent start`)
    holds RUN_DIR_ENV equal to the resolved run directory. Its command line proves nothing: a
    `tail -f RUN_DIR/output.log`, a `distmon RUN_DIR` or an editor names the directory too."""
    want = str(Path(run_dir).resolve())
    try:
        return proc.environ().get(RUN_DIR_ENV) == want
    except psutil.AccessDenied:  # another user's process: not provably ours
        return False
