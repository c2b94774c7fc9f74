"""LogdirWatcher: finds runs under the roots and feeds every new record into a RunStore.

inotify (through watchdog) wakes the worker thread; changes are debounced, and a periodic
re-scan is the safety net for anything a notification missed. Polling is used when asked,
when the root's filesystem never sends inotify events (NFS, CIFS, SSHFS and other FUSE,
Lustre, GPFS), or when inotify cannot be set up (e.g. the watch limit is reached).

The thread (a distcore.producer.Loop) never dies: a failure reading one file is that file's
problem in its run (the other files and runs go on); a failure of a whole pass is kept in
`errors()` and the loop backs off and tries again. What cannot be listed under the roots is in
`problems()`.

Its rooms: inotify.py (the watchdog observer and its handler, loaded only in inotify mode),
first_read.py (the order and pace of a sweep's first read), fstype.py (the mode),
agent_files.py (which run.json were written: the job index looks at those alone); here the
state (each file's offset, each run's files), the loop's step, the passes and the reads.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from distcore.events.agent_files import AgentFiles, local_path
from distcore.events.discovery import Found, RunDir, root_prefixes, run_name, walk_runs
from distcore.events.first_read import (
    Landed,
    first_found,
    head_start,
    read_fresh,
    wait_for_draw,
)
from distcore.events.fstype import Mode, choose_mode, mount_fs_type
from distcore.events.reader import FileState, read_new
from distcore.events.store import RunStore
from distcore.names import RUN_JSON
from distcore.producer import Failing, Loop, ProducerError, backoff
from distcore.tfrecord import Batch

_MAX_BACKOFF = 30.0
_FIRST_BACKOFF = 0.5  # a failed pass is tried again soon: most are a file replaced mid-pass
# The files inotify named are read at most this often: a live job logging every 5 steps writes
# its events file dozens of times a second, and a read of each append was most of what
# watching it cost (the front ends show it once a second).
_READ_EVERY = 0.2
# The share of a core a pass over everything may take while nothing changes: a pass over a
# sweep's 10,000 runs takes about a second, so it runs less often than the interval says.
# With inotify the pass is only the safety net (a lost event, a folder reached through a
# link; an overflow of the kernel's queue asks for a pass at once); polling is how changes
# are seen at all.
_IDLE_SHARE: dict[Mode, float] = {"inotify": 0.005, "poll": 0.05}


class LogdirWatcher:
    def __init__(
        self,
        roots: Sequence[Path],
        store: RunStore,
        *,
        poll: bool = False,
        poll_interval: float = 1.0,
        rescan_interval: float = 10.0,
        debounce: float = 0.02,
        fs_type: Callable[[Path], str | None] = mount_fs_type,
        clock: Callable[[], float] = time.monotonic,
        observer_factory: Callable[[], Any] | None = None,
        workers: int | None = None,
        first_drawn: threading.Event | None = None,
    ) -> None:
        """`first_drawn`: set by a front end once it drew the first runs a first read told it
        of; the read of the rest waits for it (first_read.FIRST_DRAW_WAIT at most). Without
        one (`--once`, `--serve`), runs never read are read in the walk's order, their mtimes
        not looked up before the read's own fstat.
        `observer_factory`: makes the inotify observer (watchdog's `Observer` unless given)."""
        self._roots = tuple(Path(r) for r in roots)
        self._prefixes = root_prefixes(self._roots)
        self._first_drawn = first_drawn
        self._newest_first = first_drawn is not None  # a front end shows rows as they land
        self._store = store
        self._poll_interval = poll_interval
        self._rescan_interval = rescan_interval
        self._debounce = debounce
        self._clock = clock
        self._observer_factory = observer_factory
        self._files: dict[Path, FileState] = {}
        self._plugins: dict[str, dict[str, str]] = {}
        self._runs: dict[str, RunDir] = {}
        self._gone: set[str] = set()
        self._dirty: set[Path] = set()
        self._rescan_needed = False
        self._dirty_lock = threading.Lock()
        self._observer: Any = None
        self._mode, self._reason = choose_mode(self._roots, poll, fs_type)
        # The loop's step paces itself (next_in): the interval is only its fallback.
        self._loop = Loop("distmon-logdir-watcher", self._tick, interval=self._interval(),
                          clock=clock, on_error=self._failed)
        self._stop = self._loop.stop_event  # a long pass ends early on close
        self._next_rescan = 0.0
        self._workers = workers if workers is not None else min(4, os.cpu_count() or 1)
        self._problems: tuple[str, ...] = ()
        self._failing = Failing("watcher")
        self._wall_clock: Callable[[], float] = time.time
        self._last_pass: tuple[float, float] | None = None  # (when it ended, seconds it took)
        self._landing: Landed | None = None  # the batched first read under way
        self._agent_files = AgentFiles()
        self._last_read = float("-inf")  # when the files inotify named were last read

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def mode_reason(self) -> str:
        return self._reason

    def problems(self) -> tuple[str, ...]:
        """Paths under the roots that could not be listed or are not regular files (one line
        each, from the latest scan)."""
        return self._problems

    def errors(self) -> tuple[ProducerError, ...]:
        """The watcher loop's failure, while it lasts (the loop keeps trying)."""
        return self._failing.errors()

    def progress(self) -> tuple[int, int] | None:
        """(runs read, runs to read) while a pass reads runs never read before (a sweep's
        first read, for the dashboard's header); None otherwise."""
        landing = self._landing
        return None if landing is None else (landing.count, landing.total)

    def agent_changes(self) -> frozenset[Path]:
        """The job directories whose run.json was written, replaced or removed since the last
        call (each told once): by inotify as it happens, by each full pass otherwise."""
        return self._agent_files.take()

    def subscribe_agent_changes(self, callback: Callable[[], None]) -> Callable[[], None]:
        """`callback()`, on the watcher's or inotify's thread, when a run.json changed."""
        return self._agent_files.subscribe(callback)

    # One synchronous pass: usable without start().
    def scan_once(self) -> frozenset[str]:
        began = time.monotonic()
        changed = self._rescan()
        self._store.notify(changed)
        self._last_pass = (self._clock(), time.monotonic() - began)
        return changed

    def start(self) -> None:
        if self._loop.started:
            return
        if self._mode == "inotify":
            self._start_observer()
        # The first pass scans everything, unless scan_once() just did (the dashboard's first
        # read): then it is the pass, and the next comes when it would have.
        self._next_rescan = self._clock()
        if self._last_pass is not None:
            ended, took = self._last_pass
            self._next_rescan = ended + self._pause(self._interval(), took)
        self._loop.start()

    def close(self) -> None:
        self._loop.stop()
        self._stop_observer()
        self._loop.join(10)

    def _start_observer(self) -> None:
        try:
            # watchdog: only where it is used. Its import reads files too, so at the open-file
            # limit it fails with EMFILE like inotify_init itself: then poll as well.
            from distcore.events.inotify import start_observer

            self._observer = start_observer(self._roots, self._on_change, self._observer_factory)
        except OSError as err:  # typically ENOSPC: the inotify watch limit; EMFILE
            self._mode, self._reason = "poll", f"inotify failed ({err}); polling"

    def _stop_observer(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            from distcore.events.inotify import stop_observer

            stop_observer(observer)

    def _on_change(self, path: str, structural: bool) -> None:
        """inotify's word (on its thread) that `path` changed; structural: a directory, a
        deletion or a move, which only a full pass can follow. A run.json is the job index's
        (told at once), not the reader's."""
        if os.path.basename(path) == RUN_JSON:  # replaced whole: a move, not a pass's work
            self._agent_files.written(local_path(path, os.getcwd()))
            return
        with self._dirty_lock:
            if structural or Path(path) not in self._files:
                self._rescan_needed = True
            else:
                self._dirty.add(Path(path))
        self._loop.wake()

    def _interval(self) -> float:
        """How often a full pass runs while it is cheap."""
        return self._poll_interval if self._mode == "poll" else self._rescan_interval

    def _tick(self) -> None:
        """The loop's step, at the next full pass or when inotify wakes it: a full pass when
        one is due or asked for, else a read of the files inotify named."""
        with self._dirty_lock:
            woke = bool(self._dirty) or self._rescan_needed
        settle = max(self._debounce, self._last_read + _READ_EVERY - time.monotonic())
        if woke and self._loop.sleep(settle):  # let a burst of writes settle
            return  # closing
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
            rescan, self._rescan_needed = self._rescan_needed, False
        if rescan or self._clock() >= self._next_rescan:
            self._next_rescan = self._clock() + self._timed_scan(self._interval())
        elif dirty:
            self._store.notify(self._read_files(dirty))
            self._last_read = time.monotonic()
        self._failing.ok()
        self._loop.next_in(self._next_rescan - self._clock())

    def _failed(self, err: Exception) -> None:
        """Never die: show it, back off, and make the next try a full pass."""
        message = f"{type(err).__name__}: {err}".splitlines()[0] if str(err) else repr(err)
        self._failing.fail(message, self._wall_clock())
        with self._dirty_lock:
            self._rescan_needed = True
        self._loop.next_in(backoff(self._loop.failures, _FIRST_BACKOFF, _MAX_BACKOFF))

    def _timed_scan(self, interval: float) -> float:
        """A full pass; how long until the next one."""
        self.scan_once()
        took = self._last_pass[1] if self._last_pass is not None else 0.0
        return self._pause(interval, took)

    def _pause(self, interval: float, took: float) -> float:
        """The interval, or longer when a pass is costly (a share of a core at most)."""
        return max(interval, took / _IDLE_SHARE[self._mode])

    def _rescan(self) -> frozenset[str]:
        problems: list[str] = []
        # Nothing read yet and a front end waits for the newest rows: the walk's mtimes order
        # the first read, and a long walk's first runs are shown before it goes on. Else
        # nothing needs them before the read's own fstat.
        first = not self._runs and not self._files and self._newest_first
        agent: list[str] = []
        try:
            told = first_found(time.monotonic(), self._read_newest) if first else None
            walked = walk_runs(self._roots, problems, mtimes=first, agent=agent, told=told)
            self._problems = tuple(problems)
            self._agent_files.listed(local_path(d, os.getcwd()) for d in agent)
            mtimes = {w.name: w.mtime or None for w in walked} if first else None
            newest = head_start(walked) if mtimes is not None else None
            if self._landing is not None:  # a long walk's first runs are read: now the rest
                self._landing.total = len(walked)
            elif newest is not None:  # a sweep's first read: its newest first
                self._read_newest(newest, len(walked))
            found = {w.name: w.run() for w in walked}
            synced = self._sync_runs(list(found.values()), mtimes)
        finally:
            self._landing = None
        changed: set[str] = set()
        if self._stop.is_set():  # close() during a long first read
            return frozenset(name for name, hit in synced.items() if hit)
        for name in found:
            if synced[name] or name in self._gone:
                changed.add(name)
            self._gone.discard(name)
        for name, old in self._runs.items():
            if name not in found and name not in self._gone:
                for path in old.files:
                    self._files.pop(path, None)
                self._store.set_files(name, old.path, 0, None)
                self._gone.add(name)
                changed.add(name)
        self._runs = {**{n: r for n, r in self._runs.items() if n in self._gone}, **found}
        return frozenset(changed)

    def _read_newest(self, newest: list[Found], total: int) -> None:
        """A first read of many runs: the newest few (or a long walk's first) are read (and
        shown) before the others' Paths are even made; the rest of the read (_sync_runs)
        finds them read."""
        self._landing = Landed(self._store.notify, total)  # the whole read's progress
        self._read_fresh([w.run() for w in newest], {w.name: w.mtime or None for w in newest})

    def _sync_runs(
        self, runs: list[RunDir], mtimes: dict[str, float | None] | None = None
    ) -> dict[str, bool]:
        """Read the runs, several at once where there are cores for it: the decoding is numpy
        work that releases the GIL, so threads share the cores without copying any state.
        Runs never read before (a sweep's thousands of small ones) are read in batches;
        `mtimes`: their newest files' mtimes where the walk has them."""
        fresh = [r for r in runs if self._is_fresh(r)]
        hits = self._read_fresh(fresh, mtimes) if len(fresh) > 1 else {}
        rest = [r for r in runs if r.name not in hits]
        if self._workers <= 1 or len(rest) <= 1:
            hits |= {run.name: not self._stop.is_set() and self._sync_run(run) for run in rest}
            return {run.name: hits[run.name] for run in runs}
        with ThreadPoolExecutor(self._workers, thread_name_prefix="distmon-reader") as pool:
            found = list(pool.map(lambda r: not self._stop.is_set() and self._sync_run(r), rest))
        hits |= {run.name: hit for run, hit in zip(rest, found, strict=True)}
        return {run.name: hits[run.name] for run in runs}

    def _is_fresh(self, run: RunDir) -> bool:
        return run.name not in self._runs and not any(p in self._files for p in run.files)

    def _read_fresh(
        self, runs: list[RunDir], known: dict[str, float | None] | None = None
    ) -> dict[str, bool]:
        """Fresh runs of small files, batched and told as they land (first_read.read_fresh);
        those it leaves are not in the result. `known`: mtimes the walk found."""
        # One progress for a whole first read (_read_newest began it), else this read's own
        landed = self._landing = self._landing or Landed(self._store.notify, len(runs))
        order = (known or {}) if self._newest_first else None
        read = read_fresh(
            runs, order, landed, store=self._store, apply=self._apply,
            plugins=lambda name: self._plugins.setdefault(name, {}), workers=self._workers,
            stop=self._stop, drawn=self._wait_for_the_draw,
        )
        for run, files in read:
            self._keep_read(run, files)
        return {run.name: True for run, _ in read}

    def _keep_read(self, run: RunDir, files: list[FileState]) -> None:
        """A batched read's file states are the run's now, as if read one by one."""
        for state in files:
            self._files[state.path] = state
            self._store.set_file_error(run.name, run.path, state.path.name, None)
        self._store.set_files(run.name, run.path, len(run.files), self._newest(run))

    def _wait_for_the_draw(self) -> None:
        """Once per watcher: the first rows are drawn once."""
        drawn, self._first_drawn = self._first_drawn, None
        if drawn is not None:
            wait_for_draw(drawn, self._stop)

    def _sync_run(self, run: RunDir) -> bool:
        old = self._runs.get(run.name)
        removed = set(old.files if old else ()) - set(run.files)
        for path in removed:
            self._files.pop(path, None)
            self._store.set_file_error(run.name, run.path, path.name, None)
        changed = old is None or old.files != run.files
        read = [p for p in (old.files if old else ()) if p in self._files and self._files[p].offset]
        # A file gone, or a new one that sorts before one already read: the run is no longer
        # what its files say; read it afresh (the restart rule depends on the order of files).
        last = max(read, default=None)
        added = set(run.files) - set(old.files if old else ())
        inserted = last is not None and any(p < last for p in added)
        if removed or inserted:
            self._reread(run)
            changed = True
        else:
            changed |= self._read_run_files(run, list(run.files))
        self._store.set_files(run.name, run.path, len(run.files), self._newest(run))
        return changed

    def _read_run_files(self, run: RunDir, paths: list[Path]) -> bool:
        """Read new bytes of the run's files; when bytes already read changed, the whole run
        is read afresh, so its state is always what a fresh read of its files gives."""
        changed = False
        for path in paths:
            hit, reset = self._read_file(run, path)
            changed |= hit
            if reset:
                self._reread(run)
                return True
        return changed

    def _reread(self, run: RunDir) -> None:
        for _ in range(3):  # a file rewritten again during the pass: once more
            self._store.reset_run(run.name, run.path)
            self._plugins[run.name] = {}
            for path in run.files:
                self._files[path] = FileState(path)
            if not any([self._read_file(run, path)[1] for path in run.files]):
                return

    def _newest(self, run: RunDir) -> float | None:
        mtimes = [self._files[p].mtime for p in run.files if p in self._files]
        return max((m for m in mtimes if m), default=None)

    def _read_file(self, run: RunDir, path: Path) -> tuple[bool, bool]:
        """(anything new, bytes already read changed)."""
        state = self._files.get(path)
        if state is None:
            state = self._files[path] = FileState(path)
        resets = state.resets
        plugins = self._plugins.setdefault(run.name, {})
        try:
            changed = read_new(state, plugins, lambda batch: self._apply_read(run, path, batch))
        except Exception as err:  # one file's failure is that file's problem
            state.error = f"reader failed: {type(err).__name__}: {err}".splitlines()[0]
            changed = True
        self._store.set_file_error(run.name, run.path, path.name, state.error)
        return changed, state.resets != resets

    def _apply(self, run: RunDir, path: Path, batch: Batch) -> None:
        self._store.apply(run.name, run.path, batch, path.name)

    def _apply_read(self, run: RunDir, path: Path, batch: Batch) -> None:
        """A batch of the ordinary reader: the run's files (and so its status) before its
        points, so that nobody sees a point of a fresh file in a run that is not live yet."""
        self._store.set_files(run.name, run.path, len(run.files), self._newest(run))
        self._apply(run, path, batch)

    def _read_files(self, paths: set[Path]) -> frozenset[str]:
        """Read the files inotify named: their runs found by name, not among every run (a
        live job's every write went over a sweep's 100,000)."""
        changed = set()
        for name in {n for p in paths if (n := self._run_at(p.parent)) is not None}:
            run = self._runs[name]
            hits = [p for p in run.files if p in paths]
            if hits and name not in self._gone and self._read_run_files(run, hits):
                self._store.set_files(name, run.path, len(run.files), self._newest(run))
                changed.add(name)
        return frozenset(changed)

    def _run_at(self, directory: Path) -> str | None:
        for prefix, root in zip(self._prefixes, self._roots, strict=True):
            if directory.is_relative_to(root) and (name := run_name(prefix, root, directory)) \
                    in self._runs:
                return name
        return None
