"""Incremental reading of one event file: from the offset of the last complete record."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from distcore.events.batch import Batch, decode_frames
from distcore.events.buffers import PADDING
from distcore.events.framing import FOOTER, HEADER, MAX_RECORD, frame

CHUNK: Final = 4 << 20


@dataclass
class FileState:
    path: Path
    identity: tuple[int, int] | None = None  # (st_dev, st_ino)
    offset: int = 0  # end of the last complete (or skipped) record
    size: int = -1  # size at the last read, to skip unchanged files cheaply
    mtime: float = 0.0

    def stat(self) -> os.stat_result | None:
        try:
            return os.stat(self.path)
        except OSError:
            return None


def read_new(state: FileState, plugins: dict[str, str], emit: Callable[[Batch], None]) -> bool:
    """Read what was appended since the last call; False if the file is gone or unchanged."""
    st = state.stat()
    if st is None:
        return False
    identity = (st.st_dev, st.st_ino)
    if identity != state.identity or st.st_size < state.offset:
        # Replaced or truncated: read again from the start.
        state.identity, state.offset, state.size = identity, 0, -1
    if st.st_size == state.size and st.st_mtime == state.mtime:
        return False
    state.size, state.mtime = st.st_size, st.st_mtime
    try:
        with open(state.path, "rb") as f:
            _read_from(f.fileno(), state, st.st_size, plugins, emit)
    except OSError:
        return False
    return True


def decode_chunk(
    data: bytes | bytearray, base_offset: int, plugins: dict[str, str]
) -> tuple[Batch | None, int]:
    """Decode the complete records at the start of `data`, the bytes of an event file from
    `base_offset` (a record boundary) on: any byte source (a local file, SSH, an object store)
    feeds the same framing and decoding. Returns the batch (None when no record is complete yet)
    and how many bytes it consumed; problem offsets are made absolute with `base_offset`."""
    raw = bytearray(len(data) + PADDING)
    raw[: len(data)] = data
    buf = np.frombuffer(raw, dtype=np.uint8)
    frames = frame(raw, buf, len(data))
    if frames.end == 0:
        return None, 0
    batch = decode_frames(raw, buf, frames, plugins)
    batch.problems = [(kind, off + base_offset) for kind, off in batch.problems]
    return batch, frames.end


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
        buf = np.frombuffer(raw, dtype=np.uint8)
        frames = frame(raw, buf, got)
        if frames.end == 0:
            # Nothing complete: either the last record is still being written, or it is
            # larger than the chunk: then read it whole next time round.
            needed = int.from_bytes(raw[:8], "little") + HEADER + FOOTER
            if got < want or needed <= want or needed > MAX_RECORD + HEADER + FOOTER:
                return
            want = needed
            continue
        batch = decode_frames(raw, buf, frames, plugins)
        batch.problems = [(kind, off + state.offset) for kind, off in batch.problems]
        state.offset += frames.end
        emit(batch)
        if got < want:
            return
        want = _chunk_size(max(size, state.offset + CHUNK), state.offset)
