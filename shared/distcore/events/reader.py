"""Incremental reading of one event file: from the offset of the last complete record.

Files are opened without blocking and read only if they are regular files (a FIFO named like an
event file would otherwise hang the reader). A file rewritten in place (same inode, new bytes)
is recognised by the bytes remembered at its start and just before the offset, and read again
from the start. What cannot be read is kept in `FileState.error`, for the run's problems.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from distcore.tfrecord import (
    FOOTER,
    HEADER,
    MAX_RECORD,
    PADDING,
    ZERO_BYTES,
    Batch,
    decode,
    find_header,
)

CHUNK: Final = 4 << 20
_MARK: Final = 32  # bytes remembered at the start and before the offset


@dataclass
class FileState:
    path: Path
    identity: tuple[int, int] | None = None  # (st_dev, st_ino)
    offset: int = 0  # end of the last complete (or skipped) record
    size: int = -1  # size at the last read, to skip unchanged files cheaply
    mtime: float = 0.0
    head: bytes = b""  # the file's first bytes, as read
    tail: bytes = b""  # the bytes just before `offset`, as read
    error: str | None = None  # why the file could not be read, if it could not
    resets: int = 0  # times bytes already read changed (replaced, truncated, rewritten)

    def stat(self) -> os.stat_result | None:
        try:
            return os.stat(self.path)
        except OSError:
            return None


def read_new(state: FileState, plugins: dict[str, str], emit: Callable[[Batch], None]) -> bool:
    """Read what was appended since the last call; False if the file is gone or unchanged
    (True when it became unreadable or readable again: `state.error` changed)."""
    before = state.error
    try:
        fd = os.open(state.path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    except OSError as err:
        state.error = f"cannot open: {err.strerror or err}"
        return state.error != before
    try:
        read = _read_open(fd, state, plugins, emit)
        state.error = None
    except OSError as err:
        state.error = f"cannot read: {err.strerror or err}"
        read = False
    finally:
        os.close(fd)
    return read or state.error != before


def _read_open(
    fd: int, state: FileState, plugins: dict[str, str], emit: Callable[[Batch], None]
) -> bool:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(0, "not a regular file")
    identity = (st.st_dev, st.st_ino)
    if identity != state.identity or st.st_size < state.offset:
        # Replaced or truncated: read again from the start.
        state.resets += state.identity is not None
        _restart(state)
        state.identity = identity
    if st.st_size == state.size and st.st_mtime == state.mtime:
        return False
    if state.offset and _rewritten(fd, state):
        state.resets += 1
        _restart(state)
    state.size, state.mtime = st.st_size, st.st_mtime
    _read_from(fd, state, st.st_size, plugins, emit)
    return True


def _restart(state: FileState) -> None:
    state.offset, state.size, state.head, state.tail = 0, -1, b"", b""


def _rewritten(fd: int, state: FileState) -> bool:
    """Whether the bytes already read changed (a file rewritten in place keeps its inode)."""
    head = os.pread(fd, len(state.head), 0)
    tail = os.pread(fd, len(state.tail), state.offset - len(state.tail))
    return head != state.head or tail != state.tail


def _chunk_size(size: int, offset: int) -> int:
    return min(CHUNK, max(HEADER + FOOTER, size - offset))


def _read_from(
    fd: int, state: FileState, size: int, plugins: dict[str, str], emit: Callable[[Batch], None]
) -> None:
    want = _chunk_size(size, state.offset)
    while True:
        raw = bytearray(want + PADDING)
        got = os.preadv(fd, [memoryview(raw)[:want]], state.offset)
        if got < HEADER + FOOTER:
            return
        batch, consumed = decode(raw, plugins, size=got, base_offset=state.offset)
        if batch is None:
            # Nothing complete: the last record is still being written, or it is larger than
            # the chunk (then read it whole, never more than the file holds), or zeros that
            # more data follows.
            if got == want and _skip_zero_chunk(fd, state, raw, got, size, emit):
                want = _chunk_size(size, state.offset)
                continue
            needed = int.from_bytes(raw[:8], "little") + HEADER + FOOTER
            if got < want or needed <= want or needed > MAX_RECORD + HEADER + FOOTER:
                return
            if needed > size - state.offset:
                return
            want = needed
            continue
        _advance(fd, state, consumed)
        emit(batch)
        if got < want:
            return
        want = _chunk_size(max(size, state.offset + CHUNK), state.offset)


def _advance(fd: int, state: FileState, consumed: int) -> None:
    state.offset += consumed
    if len(state.head) < _MARK:
        state.head = os.pread(fd, _MARK, 0)[: state.offset]
    state.tail = os.pread(fd, min(_MARK, state.offset), state.offset - min(_MARK, state.offset))


def _skip_zero_chunk(
    fd: int, state: FileState, raw: bytearray, got: int, size: int, emit: Callable[[Batch], None]
) -> bool:
    """A chunk of zeros that the file continues past: skip to the next nonzero byte, if the
    file has one (zeros to the end are preallocated space, not written yet: wait there)."""
    if raw.count(0, 0, got) != got:
        return False
    pos = state.offset + got
    while pos < size:
        try:
            pos = os.lseek(fd, pos, os.SEEK_DATA)  # jumps over holes in sparse files
        except OSError:
            return False  # no data after pos (ENXIO), or no SEEK_DATA here
        raw = bytearray(CHUNK + PADDING)
        got = os.preadv(fd, [memoryview(raw)[:CHUNK]], pos)
        if got == 0:
            return False
        block = np.frombuffer(raw, dtype=np.uint8)
        nonzero = np.flatnonzero(block[:got])
        if len(nonzero):
            start = max(0, int(nonzero[0]) - (HEADER - 1))
            found = find_header(block, start, got)  # land on the header, not just before it
            skipped = max(state.offset, pos + (found if found <= got - HEADER else start))
            emit(Batch(problems=[(ZERO_BYTES, state.offset)]))
            _advance(fd, state, skipped - state.offset)
            return True
        pos += got
    return False
