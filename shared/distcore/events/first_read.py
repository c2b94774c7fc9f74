"""A first read of many runs (a sweep's thousands), planned so that the first rows show early.

The LogdirWatcher (watch.py) keeps the state (the files read, the read's progress); this says
in what order and when: the walk's newest FIRST_RUNS are read before the other runs' Paths are
even made (`head_start`), or the first found where the walk is long (FIRST_WALK_SECONDS);
runs never read before are read in batches (`read_fresh`, many.py), newest first
(`newest_first`), the newest few alone, then, once the front end drew them (FIRST_DRAW_WAIT at
most: `wait_for_draw`), the rest dealt out among the reader threads (`read_in_turn`); `Landed`
tells the store's listeners what landed as it lands, at most every NOTIFY_SECONDS, and is the
read's progress.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from distcore.events.discovery import Found, RunDir, Told
from distcore.events.many import Apply, read_fresh_runs
from distcore.events.reader import FileState
from distcore.events.store import RunStore
from distcore.tfrecord import Batch

FIRST_RUNS = 16  # a sweep's newest runs, read (and shown) before the rest
# A first walk that takes longer (a sweep of 100,000 runs): the first runs it found are read
# (and shown) then, before it goes on, instead of the newest once it ends.
FIRST_WALK_SECONDS = 0.25
# How long a first read waits, once its newest runs are in the store, for the front end to draw
# them: the rest's reader threads would take the GIL that the draw needs (the first rows came
# later: docs/benchmarks.md, "Measured choices"). A bound, not a pause.
FIRST_DRAW_WAIT = 0.5
Done = TypeVar("Done")


class Landed:
    """Runs read so far in a long first pass, told to the store's listeners at most every
    NOTIFY_SECONDS (from any reader thread)."""

    NOTIFY_SECONDS = 0.1

    def __init__(self, notify: Callable[[frozenset[str]], None], total: int) -> None:
        self._notify = notify
        self._lock = threading.Lock()
        self._names: set[str] = set()
        self._landed: set[str] = set()  # every run read so far in this pass
        self.total = total
        self._last = float("-inf")  # the first run read is told at once

    @property
    def count(self) -> int:
        return len(self._landed)

    def add(self, name: str) -> None:
        with self._lock:
            self._names.add(name)
            self._landed.add(name)
            if time.monotonic() - self._last < self.NOTIFY_SECONDS:
                return
            names, self._names, self._last = frozenset(self._names), set(), time.monotonic()
        self._notify(names)

    def flush(self) -> None:
        """Tell what landed since the last notice now (the first rows)."""
        with self._lock:
            names, self._names, self._last = frozenset(self._names), set(), time.monotonic()
        if names:
            self._notify(names)


def head_start(walked: list[Found]) -> list[Found] | None:
    """The newest FIRST_RUNS of a walk that found more (in sorted()'s order); else None."""
    if len(walked) <= FIRST_RUNS:
        return None
    return heapq.nlargest(FIRST_RUNS, walked, key=lambda w: w.mtime)


def first_found(began: float, read: Callable[[list[Found], int], None]) -> Told:
    """What a first walk tells of the runs it found so far (discovery.Told): once it has taken
    FIRST_WALK_SECONDS, `read(the first FIRST_RUNS found, how many were found)`, before it goes
    on (the newest first, head_start, where the walk is quicker)."""

    def told(found: Mapping[str, Found]) -> bool:
        if time.monotonic() - began < FIRST_WALK_SECONDS or not found:
            return False
        read(list(itertools.islice(found.values(), FIRST_RUNS)), len(found))
        return True

    return told


def read_fresh(
    runs: list[RunDir], known: dict[str, float | None] | None, landed: Landed, *,
    store: RunStore, apply: Apply, plugins: Callable[[str], dict[str, str]], workers: int,
    stop: threading.Event, drawn: Callable[[], None],
) -> list[tuple[RunDir, list[FileState]]]:
    """Read runs none of whose files was read before, batched (many.py), newest first and in
    turns; `drawn()` once the newest are told. The store hears of each run as it lands (its
    files, then its points through `apply`), so that the first rows show while the rest is
    read. Returns the runs read with their file states; those many.py leaves are not in it.
    `known`: mtimes the walk found (the others are looked up); None where no front end waits
    for the newest rows (`--once`, `--serve`): the runs are read as the walk found them, and
    no file is looked at before its read opens it."""
    if known is not None:
        runs = newest_first(runs, known)[0]
    begun: set[str] = set()  # each run is one thread's: no lock needed

    def apply_fresh(run: RunDir, path: Path, batch: Batch, newest: float | None) -> None:
        if run.name not in begun:  # its files (and so its status) before its points, and
            # now: set at the end, they changed every run at once (the index judged all
            # 10,000 jobs again, the table updated every row, after all were listed)
            begun.add(run.name)
            store.set_files(run.name, run.path, len(run.files), newest)
        apply(run, path, batch)
        landed.add(run.name)

    def read(part: list[RunDir]) -> dict[str, list[FileState]]:
        return {} if stop.is_set() else read_fresh_runs(part, plugins, apply_fresh)[0]

    def told() -> None:  # the newest are in: tell them, and let the front end draw them
        landed.flush()
        drawn()

    by_name = {run.name: run for run in runs}
    done = read_in_turn(runs, read, workers, told)
    return [(by_name[name], files) for states in done for name, files in states.items()]


def newest_first(
    runs: list[RunDir], known: dict[str, float | None]
) -> tuple[list[RunDir], dict[str, float | None]]:
    """The runs, newest first, and each one's newest mtime (`known`: those the walk found;
    the others are looked up; None where none is known)."""
    mtimes = {run.name: known.get(run.name) or _newest_mtime(run) or None for run in runs}
    return sorted(runs, key=lambda run: mtimes[run.name] or 0.0, reverse=True), mtimes


def _newest_mtime(run: RunDir) -> float:
    mtimes = []
    for path in run.files:
        with contextlib.suppress(OSError):  # gone: the read says so
            mtimes.append(os.stat(path).st_mtime)
    return max(mtimes, default=0.0)


def read_in_turn(
    runs: list[RunDir], read: Callable[[list[RunDir]], Done], workers: int,
    between: Callable[[], None],
) -> list[Done]:
    """`read` the first FIRST_RUNS runs alone, so that the first rows need not wait for whole
    batches; then `between()`; then the rest, dealt out among `workers` threads (each share is
    one thread's numpy work, in the runs' order). The reads' results, the first run's first."""
    head, tail = runs[:FIRST_RUNS], runs[FIRST_RUNS:]
    count = min(max(1, workers), len(tail)) if tail else 0
    slices = [tail[i::count] for i in range(count)]
    done = [read(head)]
    between()
    if len(slices) <= 1:
        done += [read(part) for part in slices]
    else:
        with ThreadPoolExecutor(len(slices), thread_name_prefix="distmon-batch") as pool:
            done += list(pool.map(read, slices))
    return done


def wait_for_draw(drawn: threading.Event, stop: threading.Event) -> None:
    """Until the front end drew the first rows, `stop` is set, or FIRST_DRAW_WAIT passed."""
    deadline = time.monotonic() + FIRST_DRAW_WAIT
    while not drawn.is_set() and not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0 or drawn.wait(min(left, 0.05)):
            break
