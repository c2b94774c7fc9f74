"""First reads of many small runs at once: their files read into one buffer, back to back,
and decoded together by distcore.tfrecord.decode_files (one framing and one kernel decode for
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
from distcore.tfrecord import PADDING, Batch, decode_files

SMALL_FILE: Final = 1 << 20  # larger files are read on their own (and in chunks)
BATCH_BYTES: Final = 4 << 20  # bytes decoded together (its transient arrays are ~10x that)
_ROOM: Final = BATCH_BYTES + SMALL_FILE  # the most a group holds before it is decoded
_MARK: Final = 32  # as reader._MARK: bytes remembered at the start and before the offset

Apply = Callable[[RunDir, Path, Batch], None]
# As Apply, with the run's newest file mtime as the read found it (None: none known).
ApplyRead = Callable[[RunDir, Path, Batch, float | None], None]


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

    def __init__(self, raw: bytearray | None = None) -> None:
        self.runs: list[_Run] = []
        # Files are read straight into `raw`, which read_fresh_runs hands from one group to
        # the next, rather than growing a buffer file by file (zero bytes made, copied in, the
        # buffer copied as it grew) and faulting in fresh memory for each group. Only the
        # PADDING bytes after `size` need be zero (see buffer()).
        self.raw = bytearray(PADDING) if raw is None else raw
        self.size = 0

    def add(self, run: RunDir) -> bool:
        """Read the run's files into the buffer; False (nothing kept) if one is not small,
        not regular, or cannot be read whole."""
        entry, start = _Run(run), self.size
        for path in run.files:
            loaded = self._load(path)
            if loaded is None:  # its files' bytes are left past `size`, as if never read
                self.size = start
                return False
            entry.files.append(loaded)
        self.runs.append(entry)
        return True

    def buffer(self) -> bytearray:
        """The group's bytes and then PADDING zero bytes, exactly (the decoder bounds its
        reads by the buffer's length)."""
        end = self.size + PADDING
        del self.raw[end:]  # a bytearray keeps its memory when shrunk a little
        self.raw[self.size : end] = bytes(PADDING)
        return self.raw

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
            short = base + st.st_size + PADDING - len(self.raw)
            if short > 0:  # only a group made without room for it
                self.raw.extend(bytes(short))
            try:
                got = os.preadv(fd, [memoryview(self.raw)[base : base + st.st_size]], 0)
            except OSError:
                got = -1
        except OSError:
            return None
        finally:
            os.close(fd)
        if got != st.st_size:  # failed or truncated while read: the ordinary reader's
            return None
        self.size += got
        state = FileState(path, identity=(st.st_dev, st.st_ino), size=st.st_size,
                          mtime=st.st_mtime)  # fmt: skip
        return _File(path, state, base, got)


def read_fresh_runs(
    runs: Sequence[RunDir], plugins: Callable[[str], dict[str, str]], apply: ApplyRead
) -> tuple[dict[str, list[FileState]], list[RunDir]]:
    """Read runs none of whose files was read before, in groups of about BATCH_BYTES.

    Returns (each batched run's file states, in its files' order; the runs left to the
    ordinary reader). `apply` gets each file's batch in order, as a lone read emits it, and
    the run's newest mtime as its files' fstat gave it."""
    states: dict[str, list[FileState]] = {}
    left: list[RunDir] = []
    group = _Group(bytearray(_ROOM + PADDING))
    for run in runs:
        if not group.add(run):
            left.append(run)
        if group.size >= BATCH_BYTES:
            left += _decode_group(group, plugins, apply, states)
            group = _Group(_reused(group.raw))
    if group.runs:
        left += _decode_group(group, plugins, apply, states)
    return states, left


def _decode_group(
    group: _Group, plugins: Callable[[str], dict[str, str]], apply: ApplyRead,
    states: dict[str, list[FileState]],
) -> list[RunDir]:
    spans = [[(f.base, f.size) for f in entry.files] for entry in group.runs]
    decoded = decode_files(group.buffer(), group.size, spans,
                           lambda g: plugins(group.runs[g].run.name))  # fmt: skip
    left = []
    for entry, batches in zip(group.runs, decoded, strict=True):
        if batches is None:
            left.append(entry.run)
            continue
        newest = max((f.state.mtime for f in entry.files if f.state.mtime), default=None)
        for f, batch in zip(entry.files, batches, strict=True):
            if batch is not None:
                _consumed(f, group.raw)
                apply(entry.run, f.path, batch, newest)
        states[entry.run.name] = [f.state for f in entry.files]
    return left


def _reused(raw: bytearray) -> bytearray:
    """The last group's buffer, with room for the next, if nothing decoded from it still
    looks into it (numpy views hold it: then it cannot be resized); else a new one."""
    try:
        raw.append(0)  # any change of size, never one to the same size, finds a view
    except BufferError:
        return bytearray(_ROOM + PADDING)
    raw.extend(bytes(max(0, _ROOM + PADDING - len(raw))))
    return raw


def _consumed(f: _File, raw: bytearray) -> None:
    """The file read to its end, as reader._advance leaves it."""
    end = f.base + f.size
    f.state.offset = f.size
    f.state.head = bytes(raw[f.base : f.base + min(_MARK, f.size)])
    f.state.tail = bytes(raw[end - min(_MARK, f.size) : end])
