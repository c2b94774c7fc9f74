"""Which job directories' run.json was written, as the LogdirWatcher sees it: for the job index,
which then looks at those alone.

Without it the index had to look for run.json in every job directory by turns (a `stat` of a
file that a sweep's jobs never have, thousands a second on a big sweep, however quiet). Here
the watcher tells: inotify's events name run.json as it is written, and each full pass (the
only way changes are seen when polling, the safety net with inotify) compares the run.json
files its walk listed with what the last pass found: a `stat` of each run.json there is, none
of one there is not.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from distcore.listeners import Listeners
from distcore.names import RUN_JSON

Key = tuple[int, int, int] | None  # (mtime_ns, size, inode); None: listed but not stat-able


def local_path(spelled: str, cwd: str) -> Path:
    """A path as the watcher's runs spell it: a relative one below `cwd` (RunDir's rule)."""
    path = Path(spelled)
    return path if path.is_absolute() else Path(cwd, spelled)


def _key(path: Path) -> Key:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class AgentFiles:
    """The job directories whose run.json changed since the index last asked (thread-safe:
    inotify's thread and the watcher's both report)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[Path, Key] = {}  # directory -> its run.json, as the last pass saw it
        self._changed: set[Path] = set()
        self._listeners: Listeners[None] = Listeners()

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """`callback()` (on the reporting thread) whenever a change is reported."""
        return self._listeners.subscribe(lambda _: callback())

    def take(self) -> frozenset[Path]:
        """The directories reported since the last call, each once."""
        with self._lock:
            changed, self._changed = self._changed, set()
        return frozenset(changed)

    def written(self, run_json: Path) -> None:
        """inotify's word that a run.json was written, replaced or removed."""
        self._report({run_json.parent})

    def listed(self, directories: Iterable[Path]) -> None:
        """A full pass listed run.json in these directories (and in no other): the ones new,
        changed or gone since the last pass are reported."""
        keys = {d: _key(d / RUN_JSON) for d in directories}
        with self._lock:
            old, self._keys = self._keys, keys
        changed = {d for d, k in keys.items() if old.get(d, ()) != k}
        self._report(changed | (old.keys() - keys.keys()))

    def _report(self, directories: set[Path]) -> None:
        if not directories:
            return
        with self._lock:
            self._changed |= directories
        for listener in self._listeners.current():
            listener(None)
