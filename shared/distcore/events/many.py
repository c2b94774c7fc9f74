"""First reads of many small files at once: one framing and one vectorised decode for all.

A sweep is thousands of runs of one small file each; read one by one, each file pays the fixed
cost of every numpy call in framing, CRC and decoding (issue 20: ~5.7 ms a run). Here the
files are read into one buffer, back to back, framed and fast-decoded once, and then each
file's share is assembled by the same code as a lone read (batch.decode_frames), so the result
is exactly a lone read's. A file takes this path only when its records tile it exactly (no
problem, no partial record at its end, nothing crossing its edges): then framing it alone would
find the same records. A run with any other file (damaged, growing, large, unreadable) is left
to the ordinary reader, which reads it from the start as if this had never looked at it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np

from distcore.events.batch import Batch, decode_frames
from distcore.events.buffers import PADDING
from distcore.events.discovery import RunDir
from distcore.events.fastpath import FastScalars
from distcore.events.framing import FOOTER, HEADER, Frames, frame
from distcore.events.groups import decode_grouped
from distcore.events.reader import FileState

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
    first: int = 0  # its records: frames[first:last] of the group
    last: int = 0
    tiled: bool = False  # its records cover it exactly (see _tile)


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
    buf = np.frombuffer(group.raw, dtype=np.uint8)
    frames = frame(group.raw, buf, group.size)
    _tile(frames, group)
    good = [r for r in group.runs if all(f.tiled for f in r.files)]
    picks = [np.arange(f.first, f.last) for r in good for f in r.files]
    pick = np.concatenate(picks) if picks else np.zeros(0, np.int64)
    fast = decode_grouped(buf, frames.starts[pick], frames.lengths[pick])
    pos = 0  # where each file's records start among the picked ones
    for entry in good:
        table = plugins(entry.run.name)
        for f in entry.files:
            count = f.last - f.first
            if count:
                part = Frames(frames.starts[f.first : f.last], frames.lengths[f.first : f.last],
                              f.size)  # fmt: skip
                batch = decode_frames(group.raw, buf, part, table, fast=_share(fast, pos, count))
                batch.problems = [(kind, off - f.base) for kind, off in batch.problems]
                _consumed(f, group.raw)
                apply(entry.run, f.path, batch)
            pos += count
        states[entry.run.name] = [f.state for f in entry.files]
    return [r.run for r in group.runs if r not in good]


def _tile(frames: Frames, group: _Group) -> None:
    """Set each file's range of frames, and whether its records cover it exactly, edge to
    edge, with nothing gone wrong inside it."""
    heads = frames.starts - HEADER
    ends = frames.starts + frames.lengths + FOOTER
    # breaks[i]: how many records before record i did not end where the next began
    joined = heads[1:] == ends[:-1]
    breaks = np.concatenate([[0], np.cumsum(~joined)]) if len(heads) else np.zeros(0, np.int64)
    trouble = np.array(sorted(off for _, off in frames.problems), dtype=np.int64)
    for entry in group.runs:
        for f in entry.files:
            end = f.base + f.size
            f.first, f.last = np.searchsorted(heads, [f.base, end]).tolist()
            lo, hi = np.searchsorted(trouble, [f.base, end]).tolist()
            if lo != hi or frames.end < end:
                f.tiled = False
            elif f.first == f.last:
                f.tiled = f.size == 0
            else:
                f.tiled = bool(
                    heads[f.first] == f.base and ends[f.last - 1] == end
                    and breaks[f.last - 1] == breaks[f.first]
                )


def _share(fast: FastScalars, pos: int, count: int) -> FastScalars:
    """The records pos..pos+count of a group's decode, as if decoded alone: positions from 0,
    and only the tags they use (so that each file's cost follows its own tags)."""
    lo, hi = np.searchsorted(fast.index, [pos, pos + count]).tolist()
    ids = fast.tag_ids[lo:hi]
    used, local = np.unique(ids, return_inverse=True)
    return FastScalars(
        fast.index[lo:hi] - pos, local.astype(np.int64).ravel(),
        [fast.tags[i] for i in used.tolist()], fast.steps[lo:hi], fast.wall_times[lo:hi],
        fast.values[lo:hi], fast.is_tensor[lo:hi], fast.has_metadata[lo:hi],
    )


def _consumed(f: _File, raw: bytearray) -> None:
    """The file read to its end, as reader._advance leaves it."""
    end = f.base + f.size
    f.state.offset = f.size
    f.state.head = bytes(raw[f.base : f.base + min(_MARK, f.size)])
    f.state.tail = bytes(raw[end - min(_MARK, f.size) : end])
