"""RunStore: the thread-safe home of every run. The watcher fills it; the dashboard reads
immutable snapshots and is told which runs changed."""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable
from pathlib import Path

from distcore.events.run import RunState
from distcore.events.snapshots import RunSnapshot
from distcore.listeners import Listeners
from distcore.location import RunLocation
from distcore.tfrecord import Batch

Place = Path | RunLocation  # a Path is a place on this machine (the local watcher's runs)

Listener = Callable[[frozenset[str]], None]
LIVE_SECONDS = 300.0  # TF2 writers flush every 2 minutes by default


class RunStore:
    def __init__(
        self,
        max_points: int = 2000,
        clock: Callable[[], float] = time.time,
        live_seconds: float = LIVE_SECONDS,
    ) -> None:
        if max_points < 2:
            raise ValueError("max_points must be at least 2")
        self.max_points = max_points
        self._clock = clock
        self._live_seconds = live_seconds
        self._lock = threading.Lock()
        self._runs: dict[str, RunState] = {}
        self._listeners: Listeners[frozenset[str]] = Listeners()
        # The last snapshot, kept so that the next one costs what changed, not every run:
        # runs written since (dirty), and live ones whose time to turn idle has come (a sweep
        # just written has 10,000 live runs: looking at each of them every refresh was most
        # of the dashboard's idle CPU).
        # The runs' names, sorted when a snapshot is taken: a first read adds a sweep's runs
        # newest first, about the reverse of their names' order, and keeping the list sorted
        # at each insertion moved the whole list each time.
        self._order: list[str] = []
        self._sorted = True
        self._frozen: dict[str, RunSnapshot] = {}
        self._dirty: set[str] = set()
        self._idle_at: dict[str, float] = {}  # live run -> when it turns idle
        self._expiry: list[tuple[float, str]] = []  # heap of the same (stale entries skipped)
        self._last: tuple[RunSnapshot, ...] = ()
        self._last_now = float("-inf")

    # Reading side: any thread.
    def snapshot(self) -> tuple[RunSnapshot, ...]:
        """Every run, sorted by name. The same tuple (and the same run objects) as last time
        while nothing changed, so consumers can skip what is identical."""
        now = self._clock()
        with self._lock:
            if now < self._last_now:  # an injected clock went back: live may come back too
                self._dirty.update(self._runs)
            self._last_now = now
            check, self._dirty = self._dirty | self._expired(now), set()
            changed = False
            for name in check:
                old = self._frozen.get(name)
                run = self._runs[name]
                new = run.snapshot(now, self._live_seconds)
                if new is not old:
                    self._frozen[name], changed = new, True
                self._track_live(name, run if new.status == "live" else None)
            if changed:
                if not self._sorted:
                    self._order.sort()
                    self._sorted = True
                self._last = tuple(self._frozen[name] for name in self._order)
            return self._last

    def _expired(self, now: float) -> set[str]:
        """Live runs whose time to turn idle has passed (under the lock)."""
        due = set()
        while self._expiry and self._expiry[0][0] < now:
            when, name = heapq.heappop(self._expiry)
            if self._idle_at.get(name) == when:
                del self._idle_at[name]  # tracked again if it is still live
                due.add(name)
        return due

    def _track_live(self, name: str, live: RunState | None) -> None:
        """Remember when a live run turns idle (status: now - last_modified > live_seconds)."""
        if live is None or live.last_modified is None:
            self._idle_at.pop(name, None)
            return
        when = live.last_modified + self._live_seconds
        if self._idle_at.get(name) != when:
            self._idle_at[name] = when
            heapq.heappush(self._expiry, (when, name))

    def get(self, name: str) -> RunSnapshot | None:
        now = self._clock()
        with self._lock:
            run = self._runs.get(name)
            return run.snapshot(now, self._live_seconds) if run is not None else None

    def subscribe(self, callback: Listener) -> Callable[[], None]:
        return self._listeners.subscribe(callback)

    # Writing side: the watcher's thread.
    def apply(self, name: str, path: Place, batch: Batch, file_name: str) -> None:
        with self._lock:
            self._run(name, path).apply(batch, file_name)

    def reset_run(self, name: str, path: Place) -> None:
        """Forget what was read of a run (its files are about to be read afresh)."""
        with self._lock:
            self._run(name, path).reset()

    def set_file_error(self, name: str, path: Place, file_name: str, error: str | None) -> None:
        with self._lock:
            self._run(name, path).set_file_error(file_name, error)

    def set_files(self, name: str, path: Place, count: int, last_modified: float | None) -> None:
        with self._lock:
            self._run(name, path).set_files(count, last_modified)

    def notify(self, changed: frozenset[str]) -> None:
        """Tell the listeners; outside the lock, so a listener may call snapshot()."""
        if not changed:
            return
        for listener in self._listeners.current():
            listener(changed)

    def _run(self, name: str, path: Place) -> RunState:
        """The run to change (under the lock): marked for the next snapshot."""
        run = self._runs.get(name)
        if run is None:
            where = path if isinstance(path, RunLocation) else RunLocation.on_this_machine(path)
            run = self._runs[name] = RunState(name, where, self.max_points)
            self._order.append(name)
            self._sorted = False
        self._dirty.add(name)
        return run
