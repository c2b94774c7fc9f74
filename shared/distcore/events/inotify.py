"""inotify through watchdog, for the LogdirWatcher: an observer over the roots that tells which
event files, run.json files (and directories) were written, and its start and stop.

The only module that imports watchdog: the watcher loads it when it starts in inotify mode, so
polling and one-pass reads (`--once`, `load_once`) never pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    EventsLostEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from distcore.events.discovery import EVENT_MARKER
from distcore.names import RUN_JSON

OnChange = Callable[[str, bool], None]  # (path, structural): directories, deletions and moves
# "events_lost": the kernel's queue overflowed (its watch's root): only a full pass catches up.
_WAKING_EVENTS = frozenset({"created", "modified", "deleted", "moved", "closed", "events_lost"})
# What inotify is asked for: writes only. Our own reads (open, close without a write) would
# otherwise queue events for every file a pass looks at: a pass over a sweep's runs overflowed
# the kernel's queue, and watchdog rebuilt its watches by walking the whole tree each time
# (most of the CPU distmon took with nothing written: docs/benchmarks.md, "Measured choices").
# Not DirModifiedEvent: watchdog adds one for the folder to every file created, closed after a
# write, moved or deleted there (each told by its own event too), and a folder is a full pass:
# a live job's every run.json and heartbeat write was a pass over every run.
_WATCHED_EVENTS = [
    FileCreatedEvent, DirCreatedEvent, FileModifiedEvent, FileDeletedEvent, DirDeletedEvent,
    FileMovedEvent, DirMovedEvent, FileClosedEvent, EventsLostEvent,
]  # fmt: skip


class _Handler(FileSystemEventHandler):
    def __init__(self, on_change: OnChange) -> None:
        self._on_change = on_change

    def on_any_event(self, event: FileSystemEvent) -> None:
        # Our own reads produce "opened"/"closed_no_write": ignoring them avoids a feedback loop.
        if event.event_type not in _WAKING_EVENTS:
            return
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            path = raw.decode() if isinstance(raw, bytes) else raw
            name = Path(path).name
            if path and (event.is_directory or EVENT_MARKER in name or name == RUN_JSON):
                structural = event.is_directory or event.event_type in ("deleted", "moved")
                self._on_change(path, structural)


def start_observer(
    roots: Sequence[Path], on_change: OnChange, factory: Callable[[], Any] | None = None
) -> Any:
    """An observer of the roots (watchdog's `Observer` unless `factory` makes another), started,
    calling `on_change` on its own thread. An OSError setting it up (typically ENOSPC: the
    inotify watch limit) is raised once the observer is stopped again."""
    observer = (factory or Observer)()
    try:
        handler = _Handler(on_change)
        for root in roots:
            observer.schedule(handler, str(root), recursive=True, event_filter=_WATCHED_EVENTS)
        observer.start()
    except OSError:
        stop_observer(observer)
        raise
    return observer


def stop_observer(observer: Any) -> None:
    """Stop the observer and wait for its thread (one never started is left as it is)."""
    try:
        observer.stop()
        if observer.is_alive():
            observer.join(timeout=10)
    except RuntimeError:  # never started
        pass
