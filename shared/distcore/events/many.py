"""First reads of many small runs at once: their files read into one buffer, back to back,
and decoded together by distcore.tfrecord.many (one framing and one vectorised decode for
all, each file's result exactly a lone read's). A run with a file that is not small, not
regular, unreadable, or not tiled exactly by its records (damaged, growing) is left to the
ordinary reader, which reads it from the start as if this had never looked at it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from distcore.events.discovery import RunDir
from distcore.events.reader import FileState
from distcore.tfrecord.batch import Batch
from distcore.tfrecord.buffers import PADDING
from distcore.tfrecord.many import decode_files

SMALL_FILE: Final = 1 << 20  # larger files are read on their own (and in chunks)
BATCH_BYTES: Final = 4 << 20  # bytes decoded together (its transient arrays are ~10x that)
_MARK: Final = 32  # as reader._MARK: bytes remembered at the start and before the offset

Apply = Callable[[RunDir, Path, Batch], None]


@dataclass
class _File:
    path: Path
    state: FileState
    base: int  # where its bytes start in the group's buffer
    size: int


@dataclass
class _Run:
    run: RunDir
    files: list[_File] = field(default_factory=list)


class _Group:
    """Runs whose files are read into one buffer."""

    def __init__(self) -> None:
        self.runs: list[_Run] = []
        self.raw = bytearray(PADDING)
        self.size = 0

    def add(self, run: RunDir) -> bool:
        """Read the run's files into the buffer; False (nothing kept) if one is not small,
        not regular, or cannot be read whole."""
        entry, start = _Run(run), self.size
        for path in run.files:
            loaded = self._load(path)
            if loaded is None:
                del self.raw[start : self.size]
                self.raw[start:] = bytes(PADDING)
                self.size = start
                return False
            entry.files.append(loaded)
        self.runs.append(entry)
        return True

    def _load(self, path: Path) -> _File | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > SMALL_FILE:
                return None
            base = self.size
            self.raw[base:] = bytes(st.st_size + PADDING)
            got = os.preadv(fd, [memoryview(self.raw)[base : base + st.st_size]], 0)
        except OSError:
            return None
        finally:
            os.close(fd)
        if got != st.st_size:
            return None  # truncated while read: the ordinary reader sorts it out
        self.size += got
        state = FileState(path, identity=(st.st_dev, st.st_ino), size=st.st_size,
                          mtime=st.st_mtime)  # fmt: skip
        return _File(path, state, base, got)


def read_fresh_runs(
    runs: Sequence[RunDir], plugins: Callable[[str], dict[str, str]], apply: Apply
) -> tuple[dict[str, list[FileState]], list[RunDir]]:
    """Read runs none of whose files was read before, in groups of about BATCH_BYTES.

    Returns (each batched run's file states, in its files' order; the runs left to the
    ordinary reader). `apply` gets each file's batch in order, as a lone read emits it."""
    states: dict[str, list[FileState]] = {}
    left: list[RunDir] = []
    group = _Group()
    for run in runs:
        if not group.add(run):
            left.append(run)
        if group.size >= BATCH_BYTES:
            left += _decode_group(group, plugins, apply, states)
            group = _Group()
    if group.runs:
        left += _decode_group(group, plugins, apply, states)
    return states, left


def _decode_group(
    group: _Group, plugins: Callable[[str], dict[str, str]], apply: Apply,
    states: dict[str, list[FileState]],
) -> list[RunDir]:
    spans = [[(f.base, f.size) for f in entry.files] for entry in group.runs]
    decoded = decode_files(group.raw, group.size, spans,
                           lambda g: plugins(group.runs[g].run.name))  # fmt: skip
    left = []
    for entry, batches in zip(group.runs, decoded, strict=True):
        if batches is None:
            left.append(entry.run)
            continue
        for f, batch in zip(entry.files, batches, strict=True):
            if batch is not None:
                _consumed(f, group.raw)
                apply(entry.run, f.path, batch)
        states[entry.run.name] = [f.state for f in entry.files]
    return left


def _consumed(f: _File, raw: bytearray) -> None:
    """The file read to its end, as reader._advance leaves it."""
    end = f.base + f.size
    f.state.offset = f.size
    f.state.head = bytes(raw[f.base : f.base + min(_MARK, f.size)])
    f.state.tail = bytes(raw[end - min(_MARK, f.size) : end])
