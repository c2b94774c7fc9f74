"""What one remote logdir has read so far, whatever carries the bytes (SSH or an object store).

The transport lists files (`FileMeta`) and fetches byte ranges; `LogdirTail` decides which ranges
to ask for (only what was appended since the last read), decodes them with the local reader's
entry, `distcore.tfrecord.decode`, and fills the same `RunStore` under run names prefixed by
the source's label.
A file whose identity changed or that shrank is read again from the start, as events/reader.py
does; bytes after the last complete record wait in memory, so nothing travels twice.

The local reader's contract holds: a run's files are read in the order TensorBoard reads them
(by name, i.e. by creation time for TF's names; a later file is not read while an earlier one
still has bytes to come, so the restart rule sees the same sequence), a stretch of zeros the
transport skipped is one "zero bytes skipped" problem, and each job directory's run.json is
read (by the transport, bounded) into an `AgentRecord` the job index takes from
`agent_records()`: status, plan and outcome as for local jobs, and no stat of a remote path.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np

from distcore import names
from distcore.events.discovery import EVENT_MARKER
from distcore.events.store import RunStore
from distcore.jobs.agent import MAX_RUN_JSON_BYTES, agent_record_from
from distcore.jobs.parts import TRAINING_PARTS, job_dir_of, split_run
from distcore.jobs.snapshots import AgentRecord
from distcore.location import RunLocation
from distcore.tfrecord import HEADER, ZERO_BYTES, Batch, decode, find_header

FETCH_LIMIT: Final = 8 << 20  # bytes per file per request: bounded memory, and progress shown
MAX_PENDING: Final = 256 << 20  # a record claiming more than this is skipped (as the local reader)
OVERLAP: Final = 16  # object stores: bytes re-read before the offset to notice a replaced object
SKIPPED: Final = "record too large for a remote read, skipped"
PART_DIRS: Final = frozenset((*TRAINING_PARTS, names.SYSTEM_DIR))


@dataclass(frozen=True)
class FileMeta:
    identity: object  # (dev, inode) over SSH; None where the store has no stable identity
    size: int
    mtime: float | None


@dataclass(frozen=True)
class Fetch:
    """A byte range to ask for: [start, start + length) of `rel`. A transport may skip a
    stretch of zeros, as the local reader does: it then says where its bytes start."""

    rel: str
    start: int
    length: int


def record_from_bytes(data: bytes | None) -> AgentRecord | None:
    """run.json's bytes as the local reader takes them: None when absent, too big, not JSON
    or not an object (anyone who can write the logdir can write it)."""
    if data is None or len(data) > MAX_RUN_JSON_BYTES:
        return None
    try:
        return agent_record_from(json.loads(data))
    except (ValueError, RecursionError):
        return None


@dataclass
class _File:
    identity: object
    offset: int = 0  # next byte to fetch
    pending: bytearray = field(default_factory=bytearray)  # fetched, not yet a whole record
    last: bytes = b""  # the last bytes fetched (object stores check them on the next read)
    mtime: float | None = None
    size: int = 0  # as last listed
    zeros: bool = False  # zeros from the offset to the listed end: wait here, as locally

    def complete(self) -> bool:
        return self.offset >= self.size or self.zeros


def is_event_file(rel: str) -> bool:
    return EVENT_MARKER in posixpath.basename(rel)


class LogdirTail:
    def __init__(
        self, store: RunStore, label: str, root_name: str, base: RunLocation, overlap: int = 0
    ) -> None:
        self._store = store
        self._label = label  # "gpu1:" or "s3://bucket/prefix/": run names start with it
        self._root_name = root_name  # the name of a run at the logdir itself ("gpu1:runs")
        self._base = base  # the logdir's place: its runs' are below it
        self._overlap = overlap
        self._files: dict[str, _File] = {}
        self._plugins: dict[str, dict[str, str]] = {}
        self._runs: dict[str, tuple[str, ...]] = {}  # run name -> its files, sorted (rel paths)
        self._json: dict[str, tuple[str, AgentRecord | None]] = {}  # run.json rel -> (sig, doc)
        self._records: dict[RunLocation, AgentRecord | None] = {}  # job dir -> its run.json
        self._changed: set[str] = set()
        self.bytes_fetched = 0  # what travelled, overlap included (bench and tests read it)

    def run_name(self, directory: str) -> str:
        if directory in ("", "."):
            return self._root_name
        if not self._label.endswith("/") and directory.split("/", 1)[0] in PART_DIRS:
            # The logdir is a job directory: its parts are one job, named after it.
            return f"{self._root_name}/{directory}"
        return self._label + directory

    def run_path(self, directory: str) -> RunLocation:
        return self._base.joinpath(directory)

    def plan(self, listing: Mapping[str, FileMeta], limit: int = FETCH_LIMIT) -> list[Fetch]:
        """Take a fresh listing; return the ranges to fetch (none for unchanged files). Per
        run, files in name order, none after one that this fetch will not finish."""
        events = {rel: meta for rel, meta in listing.items() if is_event_file(rel)}
        self._sync_runs(events)
        for rel, meta in events.items():
            state = self._files.get(rel)
            if state is None or state.identity != meta.identity or meta.size < state.offset:
                state = self._files[rel] = _File(meta.identity)
            state.zeros = state.zeros and (meta.size, meta.mtime) == (state.size, state.mtime)
            state.mtime, state.size = meta.mtime, meta.size
        fetches = []
        for rels in self._runs.values():
            for rel in rels:
                state = self._files[rel]
                if not state.complete():
                    back = min(self._overlap, len(state.last))
                    length = min(state.size - state.offset, limit) + back
                    fetches.append(Fetch(rel, state.offset - back, length))
                    if state.size - state.offset > limit:
                        break
        return fetches

    def deliver(self, rel: str, start: int, data: bytes) -> bool:
        """Bytes fetched for a `Fetch`; False if they show the file was replaced (read it
        again from the start next time). A `start` past the offset asked for means the
        transport skipped zeros there."""
        state = self._files.get(rel)
        if state is None:
            return False
        self.bytes_fetched += len(data)
        state.zeros = False
        if start > state.offset:
            data = self._skip_zeros(rel, state, start, data)
            start = state.offset
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
        for a file that did not grow), in name order; per run none after a file that was not
        read to its listed end (the catch-up rounds finish it first)."""
        fetches = []
        for rels in self._runs.values():
            for rel in rels:
                state = self._files[rel]
                fetches.append(Fetch(rel, state.offset, limit))
                if not state.complete():
                    break
        return fetches

    def wait_at_zeros(self, rel: str) -> None:
        """The transport found zeros from the offset to the end (preallocated space): wait
        there until the file changes; later files of the run are read meanwhile."""
        state = self._files.get(rel)
        if state is not None:
            state.zeros = True

    def _skip_zeros(self, rel: str, state: _File, start: int, data: bytes) -> bytes:
        """The local reader's rule: one problem where the zeros began (the zeros already
        fetched go with them), then on from the first valid header in what follows them (or
        from where the transport started)."""
        directory = _directory(rel)
        problem = Batch(problems=[(ZERO_BYTES, state.offset - len(state.pending))])
        state.pending.clear()
        self._store.apply(self.run_name(directory), self.run_path(directory), problem,
                          posixpath.basename(rel))  # fmt: skip
        self._changed.add(self.run_name(directory))
        padded = np.zeros(len(data) + 64, dtype=np.uint8)
        padded[: len(data)] = np.frombuffer(data, dtype=np.uint8)
        found = find_header(padded, 0, len(data))
        skip = found if found <= len(data) - HEADER else 0
        state.offset, state.last = start + skip, b""
        return data[skip:]

    # --- run.json ------------------------------------------------------------------------------
    def run_json_wanted(self) -> list[tuple[str, str]]:
        """(rel path, signature as last read) of each job directory's run.json, read or not."""
        wanted = dict.fromkeys(self._job_dirs().values())
        return [
            (rel, self._json.get(rel, ("", None))[0])
            for rel in (posixpath.normpath(posixpath.join(d, names.RUN_JSON)) for d in wanted)
        ]

    def run_json(self, rel: str, signature: str, data: bytes | None) -> None:
        """A run.json as the transport found it: `signature` ("-" for none) and, when it
        changed, its bytes (None: absent, not a regular file or too big)."""
        old = self._json.get(rel)
        if old is not None and old[0] == signature:
            return
        self._json[rel] = (signature, record_from_bytes(data))

    def run_json_signature(self, rel: str) -> str:
        return self._json.get(rel, ("", None))[0]

    def agent_records(self) -> dict[RunLocation, AgentRecord | None]:
        """Job directory (as the index computes it from a run's path) -> its run.json."""
        return self._records

    def _job_dirs(self) -> dict[str, str]:
        """Run name -> the rel directory of its job (where run.json would be)."""
        out = {}
        for name, rels in self._runs.items():
            directory = _directory(rels[0])
            part = split_run(name)[1]
            out[name] = posixpath.normpath(job_dir_of(Path(directory), part).as_posix())
        return out

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
        records: dict[RunLocation, AgentRecord | None] = {}
        for name, job_dir in self._job_dirs().items():
            rel = posixpath.normpath(posixpath.join(job_dir, names.RUN_JSON))
            record = self._json.get(rel, ("", None))[1]
            path = self.run_path(job_dir)
            if self._records.get(path) != record:
                self._changed.add(name)
            records[path] = record
        self._records = records  # swapped whole: the index reads it from its own thread
        for rel in set(self._json) - {r for r, _ in self.run_json_wanted()}:
            del self._json[rel]
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
        batch, used = decode(state.pending, plugins, base_offset=decoded_at)
        if batch is None and len(state.pending) > MAX_PENDING:
            batch, used = Batch(problems=[(SKIPPED, decoded_at)]), len(state.pending)
        if batch is None:
            return
        del state.pending[:used]
        self._store.apply(name, self.run_path(directory), batch, posixpath.basename(rel))
        self._changed.add(name)


def _directory(rel: str) -> str:
    return posixpath.dirname(rel) or "."
