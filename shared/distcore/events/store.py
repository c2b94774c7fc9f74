"""RunStore: the thread-safe home of every run. The watcher fills it; the dashboard reads
immutable snapshots and is told which runs changed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from distcore.events.batch import Batch
from distcore.events.model import RunSnapshot
from distcore.events.run import RunState
from distcore.listeners import Listeners

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

    # Reading side: any thread.
    def snapshot(self) -> tuple[RunSnapshot, ...]:
        now = self._clock()
        with self._lock:
            return tuple(
                self._runs[name].snapshot(now, self._live_seconds) for name in sorted(self._runs)
            )

    def get(self, name: str) -> RunSnapshot | None:
        now = self._clock()
        with self._lock:
            run = self._runs.get(name)
            return run.snapshot(now, self._live_seconds) if run is not None else None

    def subscribe(self, callback: Listener) -> Callable[[], None]:
        return self._listeners.subscribe(callback)

    # Writing side: the watcher's thread.
    def apply(self, name: str, path: Path, batch: Batch, file_name: str) -> None:
        with self._lock:
            self._run(name, path).apply(batch, file_name)

    def reset_run(self, name: str, path: Path) -> None:
        """Forget what was read of a run (its files are about to be read afresh)."""
        with self._lock:
            self._run(name, path).reset()

    def set_file_error(self, name: str, path: Path, file_name: str, error: str | None) -> None:
        with self._lock:
            self._run(name, path).set_file_error(file_name, error)

    def set_files(self, name: str, path: Path, count: int, last_modified: float | None) -> None:
        with self._lock:
            self._run(name, path).set_files(count, last_modified)

    def names(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._runs)

    def notify(self, changed: frozenset[str]) -> None:
        """Tell the listeners; outside the lock, so a listener may call snapshot()."""
        if not changed:
            return
        for listener in self._listeners.current():
            listener(changed)

    def _run(self, name: str, path: Path) -> RunState:
        run = self._runs.get(name)
        if run is None:
            run = self._runs[name] = RunState(name, path, self.max_points)
        return run
