"""The reference path: every record through the per-record decoder (record.py), in plain
Python. It runs where the compiled kernel is not built, and it is what the tests hold the fast
path to (every batch bit for bit)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from distcore.tfrecord.batch import (
    UNDECODABLE,
    Batch,
    _collect,
    _Columns,
    _newest,
    _segments,
)
from distcore.tfrecord.fastpath import FastScalars
from distcore.tfrecord.framing import HEADER, PADDING, Frames, frame
from distcore.tfrecord.record import UndecodableError, decode_event

_I64, _F64, _BOOL = np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.bool_)
_NO_FAST = FastScalars(_I64, _I64, [], _I64, _F64, _F64, _BOOL, _BOOL)


def decode_records(raw: bytes | bytearray, frames: Frames, plugins: dict[str, str]) -> Batch:
    """The batch of the framed records, one by one; `plugins` is read and updated."""
    batch = Batch(problems=list(frames.problems))
    columns, restarts = _Columns(), list[tuple[int, int, int]]()
    starts, lengths = frames.starts.tolist(), frames.lengths.tolist()
    for i, (start, size) in enumerate(zip(starts, lengths, strict=True)):
        try:
            event = decode_event(bytes(raw[start : start + size]), plugins)
        except UndecodableError:
            batch.problems.append((UNDECODABLE, start - HEADER))
            continue
        _collect(i, event, columns, restarts, batch)
    batch.segments = _segments(None, _NO_FAST, None, columns, restarts)
    batch.newest_wall_time = _newest(np.asarray(columns.walls, dtype=np.float64))
    return batch


def decode_files(
    raw: bytearray, groups: Sequence[Sequence[tuple[int, int]]],
    plugins: Callable[[int], dict[str, str]],
) -> list[list[Batch | None] | None]:  # fmt: skip
    """chunk.decode_files on the reference path: each file framed and decoded alone, and a
    group taken only when each of its files is whole records, edge to edge, with no damage
    (as the kernel's tiling takes it); else None, and `plugins(g)` untouched."""
    out: list[list[Batch | None] | None] = []
    for g, spans in enumerate(groups):
        framed = []
        for base, size in spans:
            own = bytearray(raw[base : base + size]) + bytes(PADDING)
            frames = frame(own, np.frombuffer(own, np.uint8), size, None)
            if frames.end != size or frames.problems:
                out.append(None)
                break
            framed.append((own, frames))
        else:
            table = plugins(g)
            out.append([decode_records(own, frames, table) if frames.end else None
                        for own, frames in framed])  # fmt: skip
    return out
