"""What one remote logdir has read so far, whatever carries the bytes (SSH or an object store).

The transport lists files (`FileMeta`) and fetches byte ranges; `LogdirTail` decides which ranges
to ask for (only what was appended since the last read), decodes them with the local reader's
`decode_chunk`, and fills the same `RunStore` under run names prefixed by the source's label.
A file whose identity changed or that shrank is read again from the start, as events/reader.py
does; bytes after the last complete record wait in memory, so nothing travels twice.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from distcore.events.batch import Batch
from distcore.events.discovery import EVENT_MARKER
from distcore.events.reader import decode_chunk
from distcore.events.store import RunStore

FETCH_LIMIT: Final = 8 << 20  # bytes per file per request: bounded memory, and progress shown
MAX_PENDING: Final = 256 << 20  # a record claiming more than this is skipped (issue 12's bound)
OVERLAP: Final = 16  # object stores: bytes re-read before the offset to notice a replaced object
SKIPPED: Final = "record too large for a remote read, skipped"


@dataclass(frozen=True)
class FileMeta:
    identity: object  # (dev, inode) over SSH; None where the store has no stable identity
    size: int
    mtime: float | None


@dataclass(frozen=True)
class Fetch:
    """A byte range to ask for: [start, start + length) of `rel`."""

    rel: str
    start: int
    length: int


@dataclass
class _File:
    identity: object
    offset: int = 0  # next byte to fetch
    pending: bytearray = field(default_factory=bytearray)  # fetched, not yet a whole record
    last: bytes = b""  # the last bytes fetched (object stores check them on the next read)
    mtime: float | None = None


def is_event_file(rel: str) -> bool:
    return EVENT_MARKER in posixpath.basename(rel)


class LogdirTail:
    def __init__(
        self, store: RunStore, label: str, root_name: str, path_base: str, overlap: int = 0
    ) -> None:
        self._store = store
        self._label = label  # "gpu1:" or "s3://bucket/prefix/": run names start with it
        self._root_name = root_name  # the name of a run at the logdir itself ("gpu1:runs")
        self._path_base = path_base  # "gpu1:/data/runs": runs' paths as shown
        self._overlap = overlap
        self._files: dict[str, _File] = {}
        self._plugins: dict[str, dict[str, str]] = {}
        self._runs: dict[str, tuple[str, ...]] = {}  # run name -> its files (rel paths)
        self._changed: set[str] = set()
        self.bytes_fetched = 0  # what travelled, overlap included (bench and tests read it)

    def run_name(self, directory: str) -> str:
        return self._root_name if directory in ("", ".") else self._label + directory

    def run_path(self, directory: str) -> Path:
        return Path(posixpath.normpath(posixpath.join(self._path_base, directory)))

    def plan(self, listing: Mapping[str, FileMeta], limit: int = FETCH_LIMIT) -> list[Fetch]:
        """Take a fresh listing; return the ranges to fetch (none for unchanged files)."""
        events = {rel: meta for rel, meta in listing.items() if is_event_file(rel)}
        self._sync_runs(events)
        fetches = []
        for rel, meta in events.items():
            state = self._files.get(rel)
            if state is None or state.identity != meta.identity or meta.size < state.offset:
                state = self._files[rel] = _File(meta.identity)
            state.mtime = meta.mtime
            if meta.size > state.offset:
                back = min(self._overlap, len(state.last))
                length = min(meta.size - state.offset, limit) + back
                fetches.append(Fetch(rel, state.offset - back, length))
        return fetches

    def deliver(self, rel: str, start: int, data: bytes) -> bool:
        """Bytes fetched for a `Fetch`; False if they show the file was replaced (read it
        again from the start next time)."""
        state = self._files.get(rel)
        if state is None:
            return False
        self.bytes_fetched += len(data)
        back = state.offset - start
        if back > 0:
            if data[:back] != state.last[-back:]:
                self._files[rel] = _File(state.identity)
                return False
            data = data[back:]
        if not data:
            return True
        state.pending += data
        state.offset += len(data)
        state.last = (state.last + data[-OVERLAP:])[-OVERLAP:]
        self._decode(rel, state)
        return True

    def known(self, limit: int = FETCH_LIMIT) -> list[Fetch]:
        """A fetch from the current offset for every known file (the transport sends nothing
        for a file that did not grow)."""
        return [Fetch(rel, state.offset, limit) for rel, state in sorted(self._files.items())]

    def identity(self, rel: str) -> object:
        state = self._files.get(rel)
        return state.identity if state is not None else None

    def mtime(self, rel: str) -> float | None:
        state = self._files.get(rel)
        return state.mtime if state is not None else None

    def restart(self, rel: str, identity: object) -> None:
        """The file was replaced since it was listed: read it from the start."""
        if rel in self._files:
            self._files[rel] = _File(identity, mtime=self._files[rel].mtime)

    def finish(self) -> frozenset[str]:
        """Record every run's file count and newest time; the names that changed since the
        last call (for store.notify)."""
        for name, rels in self._runs.items():
            mtimes = [m for r in rels if (m := self._files[r].mtime) is not None]
            self._store.set_files(
                name, self.run_path(_directory(rels[0])), len(rels), max(mtimes, default=None)
            )
        changed, self._changed = frozenset(self._changed), set()
        return changed

    def _sync_runs(self, events: Mapping[str, FileMeta]) -> None:
        runs: dict[str, list[str]] = {}
        for rel in sorted(events):
            runs.setdefault(self.run_name(_directory(rel)), []).append(rel)
        for name, rels in self._runs.items():
            if name not in runs:  # gone: keep what was read, say so
                self._store.set_files(name, self.run_path(_directory(rels[0])), 0, None)
                self._changed.add(name)
        for rel in set(self._files) - set(events):
            del self._files[rel]
        new = {name: tuple(rels) for name, rels in runs.items()}
        self._changed.update(n for n, rels in new.items() if self._runs.get(n) != rels)
        self._runs = new

    def _decode(self, rel: str, state: _File) -> None:
        directory = _directory(rel)
        name = self.run_name(directory)
        plugins = self._plugins.setdefault(name, {})
        decoded_at = state.offset - len(state.pending)
        batch, used = decode_chunk(state.pending, decoded_at, plugins)
        if batch is None and len(state.pending) > MAX_PENDING:
            batch, used = Batch(problems=[(SKIPPED, decoded_at)]), len(state.pending)
        if batch is None:
            return
        del state.pending[:used]
        self._store.apply(name, self.run_path(directory), batch, posixpath.basename(rel))
        self._changed.add(name)


def _directory(rel: str) -> str:
    return posixpath.dirname(rel) or "."
