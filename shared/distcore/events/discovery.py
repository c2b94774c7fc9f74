"""Run discovery as TensorBoard does it: every directory holding a `*tfevents*` file is a run."""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

EVENT_MARKER = "tfevents"


@dataclass(frozen=True)
class RunDir:
    name: str
    path: Path
    files: tuple[Path, ...]  # sorted by name, i.e. by creation time for TF's names


def root_prefixes(roots: Sequence[Path]) -> list[str]:
    """'' for a single root; else each root's folder name, made unique."""
    if len(roots) <= 1:
        return [""] * len(roots)
    prefixes: list[str] = []
    for root in roots:
        base = root.absolute().name or str(root.absolute())
        name, n = base, 2
        while name in prefixes:
            name, n = f"{base}-{n}", n + 1
        prefixes.append(name)
    return prefixes


def run_name(prefix: str, root: Path, directory: Path) -> str:
    return _prefixed(prefix, directory.relative_to(root).as_posix())


def _prefixed(prefix: str, rel: str) -> str:
    if not prefix:
        return rel
    return prefix if rel == "." else f"{prefix}/{rel}"


class Found(NamedTuple):
    """A run as the walk found it, in strings: its RunDir is made when asked for. A first read
    of a sweep reads its newest runs before it makes the other 10,000 runs' Paths (0.15 s of
    CPU on the way to the first rows). A tuple: made 10,000 times by a sweep's walk, a frozen
    dataclass's __init__ (object.__setattr__ per field) was a tenth of it."""

    name: str
    directory: str  # as the walk spelled it
    names: tuple[str, ...]  # its event files' names, sorted
    mtime: float  # the newest event file's mtime (0.0: unknown, or not asked for)
    cwd: str  # what a relative directory is below

    def run(self) -> RunDir:
        # A child of a Path parses only its name; the files keep the root's spelling
        base = Path(self.directory)
        return RunDir(
            self.name,
            base if base.is_absolute() else Path(self.cwd, self.directory),
            tuple(base / n for n in self.names),
        )


def _walk(
    root: Path, prefix: str, cwd: str, runs: dict[str, Found], problems: list[str], mtimes: bool
) -> None:
    """Add every run below root to `runs` (under `prefix`); symlinks followed, each real
    directory once. What cannot be listed, and event-file names that are not regular files, go
    to `problems`.

    Strings, not Paths: a sweep's 10,000 runs made 30,000 Path objects here (parsing each
    took most of discovery's time, which is on the way to the dashboard's first row); the
    walk keeps the strings that Path would print (the root's own spelling, then "/" and
    the names scandir gives), and the caller makes Paths only of runs' directories and files.
    With `mtimes`, each run's newest event-file mtime (0.0: none could be stat'ed), from the
    DirEntry: no Path, no second lookup of the name. One loop, no generator, no helper calls
    per directory: a sweep's walk is 10,000 turns of it on the way to the first row.
    """
    seen: set[tuple[int, int]] = set()
    stack = [(str(root), ".")]
    stat, scandir = os.stat, os.scandir
    while stack:
        directory, rel = stack.pop()
        try:
            st = stat(directory)
            key = (st.st_dev, st.st_ino)
            if key in seen:
                continue
            seen.add(key)
            with scandir(directory) as listing:
                entries = list(listing)
        except OSError as err:
            problems.append(f"{directory}: cannot list: {err.strerror or err}")
            continue
        files = []
        newest = 0.0
        for entry in entries:
            name = entry.name
            try:
                if entry.is_dir():  # DirEntry's type: no system call unless it is a link
                    # "./a" is "a" as a Path: the walk's strings stay what its Paths printed
                    path = name if directory == "." else entry.path
                    stack.append((path, name if rel == "." else f"{rel}/{name}"))
                elif EVENT_MARKER in name:
                    if entry.is_file():
                        files.append(name)
                        if mtimes:
                            try:
                                mtime = entry.stat().st_mtime  # followed, as os.stat(path) is
                            except OSError:  # gone since the listing: its read says so
                                mtime = 0.0
                            if mtime > newest:
                                newest = mtime
                    else:
                        problems.append(f"{entry.path}: not a regular file (or a broken link)")
            except OSError as err:
                problems.append(f"{entry.path}: {err.strerror or err}")
        if files:
            files.sort()  # by name: what sorting their Paths gave (one directory, names compared)
            run = _prefixed(prefix, rel) if prefix else rel
            runs[run] = Found(run, directory, tuple(files), newest, cwd)


def walk_runs(
    roots: Sequence[Path], problems: list[str] | None = None, *, mtimes: bool = False
) -> list[Found]:
    """Every run under the roots, in discover()'s order, unmade; with `mtimes`, each one's
    newest event file's mtime (one stat a file). What could not be looked at is added to
    `problems`. With `mtimes`, a walk begun by `prewalk` for the same roots is taken (once)."""
    found: list[str] = []
    runs: dict[str, Found] = {}
    cwd = os.getcwd()  # what Path.absolute() prefixes
    early = _take_prewalk(roots, cwd) if mtimes else None
    if early is not None:
        listed, found = early
        runs = {run.name: run for run in listed}
    else:
        for prefix, root in zip(root_prefixes(roots), roots, strict=True):
            _walk(root, prefix, cwd, runs, found, mtimes)
    if problems is not None:
        problems.extend(found)
    return list(runs.values())


# --- a first walk on the other core ------------------------------------------------------------
# A sweep's walk is 10,000 directories of system calls (0.13 s of CPU), on the dashboard's way
# to its first row. On a thread it does not overlap Textual's import: each of its ~40,000 calls
# releases the GIL, and getting it back waits for the importer's switch interval (5 ms), so
# the walk ends when the import does. A child forked before Textual loads walks on another core
# and hands its runs over a pipe; its CPU is the process's children's (waited for on taking).

# A busy machine: the child's walk costs more CPU than the parent's own (its fork, copied pages,
# its pickle: 0.2 against 0.14 s), which only pays with a core to run it on. At a load of 6 on
# 2 cores it made the first row later (2.74 against 2.30 s, medians of 6, bench/first_row.py).
SPARE_CORE = 0.75  # cores without work (the 1-minute load average's view) that a fork needs
PREWALK_FRESH = 30.0  # seconds: an older walk is not taken for a first one (walked again)
_prewalks: dict[tuple[tuple[str, ...], str], tuple[int, int, float]] = {}  # key: pid, fd, when
_prewalk_lock = threading.Lock()


def _key(roots: Sequence[Path], cwd: str) -> tuple[tuple[str, ...], str]:
    return tuple(str(r) for r in roots), cwd


def prewalk(roots: Sequence[Path]) -> bool:
    """Begin `walk_runs(roots, mtimes=True)` in a forked child; the next such walk in this
    process takes its result. Only from a process with no other thread (a fork copies only the
    caller's, whatever locks the others held); False where it was not begun."""
    if not hasattr(os, "fork") or threading.active_count() > 1 or not roots:
        return False
    if _spare_cores() < SPARE_CORE:  # no core to walk on: the child would only add its cost
        return False
    cwd = os.getcwd()
    try:
        read_fd, write_fd = os.pipe()
    except OSError:
        return False
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return False
    if pid == 0:  # the child: walk, write, exit without the parent's atexit or buffers
        code = 1
        try:
            os.close(read_fd)
            problems: list[str] = []
            runs = walk_runs(roots, problems, mtimes=True)
            with os.fdopen(write_fd, "wb") as out:
                out.write(pickle.dumps((runs, problems), pickle.HIGHEST_PROTOCOL))
            code = 0
        finally:  # a parent gone (EPIPE) or anything else: the parent walks itself
            os._exit(code)
    os.close(write_fd)
    with _prewalk_lock:
        if not _prewalks:  # a process that ends before its walk: the child ends with it
            atexit.register(_drop_all)
        _drop(_prewalks.pop(_key(roots, cwd), None))
        _prewalks[_key(roots, cwd)] = (pid, read_fd, time.monotonic())
    return True


def _spare_cores() -> float:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        return cores - os.getloadavg()[0]
    except OSError:  # no load average here: take the core to be there
        return float(cores)


def _take_prewalk(roots: Sequence[Path], cwd: str) -> tuple[list[Found], list[str]] | None:
    """The prewalk of these roots, if one was begun and is fresh: its runs and problems."""
    with _prewalk_lock:
        begun = _prewalks.pop(_key(roots, cwd), None)
    if begun is None:
        return None
    pid, fd, when = begun
    if time.monotonic() - when > PREWALK_FRESH:
        _drop(begun)
        return None
    chunks = []
    try:
        with os.fdopen(fd, "rb") as pipe:
            while chunk := pipe.read(1 << 20):
                chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
    except OSError:
        return None
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return None
    runs, problems = pickle.loads(b"".join(chunks))  # our own child's: trusted
    return runs, problems


def _drop_all() -> None:
    with _prewalk_lock:
        begun = list(_prewalks.values())
        _prewalks.clear()
    for one in begun:
        _drop(one)


def _drop(begun: tuple[int, int, float] | None) -> None:
    """A prewalk not taken: its child ended (it may be walking still) and waited for."""
    if begun is not None:
        pid, fd, _ = begun
        with contextlib.suppress(OSError):
            os.close(fd)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)  # our own child, by its pid
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)


def discover(roots: Sequence[Path], problems: list[str] | None = None) -> dict[str, RunDir]:
    """Every run under the roots; what could not be looked at is added to `problems`."""
    return {found.name: found.run() for found in walk_runs(roots, problems)}
