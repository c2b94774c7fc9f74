"""TFRecord framing: u64 length, masked CRC of the length, data, masked CRC of the data.

`frame()` finds the intact records in a buffer. A truncated last record is "not yet": `end` stops
before it, so the caller reads it again once the file grows. A bad length CRC means the framing
is lost: the reader searches forward for the next header whose CRC checks out (it only ever moves
forward, so it terminates). A bad data CRC drops that record only. A header whose record would
run past the data is "not yet" only while nothing valid follows it: when a complete, valid
record starts after it, its length was a lie (damage, or a writer that died mid-record and was
followed by another), so the reader resyncs there instead of waiting forever. Zero-filled
stretches (preallocated or sparse files) are skipped with one vectorised search.

The records are followed and checked by the compiled kernel (`compiled`, the extension module)
on its path, and by the plain Python below on the reference path: the rules above are
this module's alone, only the walks differ (tests/core/test_tfrecord_kernel.py compares them).
`record()` is the writers' side (tests, benchmarks). The CRC is masked CRC-32C
(google_crc32c); the kernel has its own (_kernel_crc.c).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from types import ModuleType
from typing import Final

import google_crc32c
import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Raw = bytes | bytearray | memoryview  # read with struct and by slices
# Zero bytes after the data, so that fixed-width reads near the end stay inside the buffer.
PADDING: Final = 16
HEADER: Final = 12
FOOTER: Final = 4
# No scalar, image or audio record comes near this; a larger length is damage, never allocated.
MAX_RECORD: Final = 256 << 20
_RESYNC_WINDOW: Final = 1 << 20
_HEAD = struct.Struct("<QI")
_DATA_CRC = struct.Struct("<I")

BAD_LENGTH_CRC: Final = "bad length CRC"
BAD_DATA_CRC: Final = "bad data CRC"
LENGTH_PAST_END: Final = "record length past the end of the file"
LENGTH_TOO_LARGE: Final = "record length over 256 MiB"
ZERO_BYTES: Final = "zero bytes skipped"


def masked_crc(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """`data` framed as one record, as TensorFlow's writers frame it."""
    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", masked_crc(head)) + data + struct.pack("<I", masked_crc(data))


@dataclass
class Frames:
    starts: I64  # offset of each intact record's data
    lengths: I64
    end: int  # everything before this offset is consumed (read or skipped)
    problems: list[tuple[str, int]] = field(default_factory=list)  # (kind, offset)


def _u8_view(buf: U8, dtype: str) -> npt.NDArray[np.generic]:
    """`_u8_view(buf, "<u4")[i]` is the little-endian u32 that starts at byte i, for every i."""
    dt = np.dtype(dtype)
    return np.ndarray((len(buf) - dt.itemsize + 1,), dtype=dt, buffer=buf, strides=(1,))


def _chain(raw: Raw, pos: int, size: int) -> tuple[list[int], int]:
    """The headers of whole records from `pos` on, each one's CRC checked, and where they stop
    (the kernel's chain: _kernel_framing.c)."""
    unpack = _HEAD.unpack_from
    heads: list[int] = []
    last = size - HEADER
    while pos <= last:
        length, crc = unpack(raw, pos)
        end = pos + length + HEADER + FOOTER
        if length > MAX_RECORD or not (length or crc) or end > size:
            break  # (a zero header is never valid: zero-filled space is skipped elsewhere)
        if masked_crc(bytes(raw[pos : pos + 8])) != crc:
            break
        heads.append(pos)
        pos = end
    return heads, pos


def _records(raw: Raw, heads: list[int]) -> tuple[list[int], list[int], list[int]]:
    """(data starts, lengths) of the records whose data CRC holds, and the heads of the rest
    (the kernel's records)."""
    starts: list[int] = []
    lengths: list[int] = []
    bad: list[int] = []
    for h in heads:
        length = _HEAD.unpack_from(raw, h)[0]
        s = h + HEADER
        if masked_crc(bytes(raw[s : s + length])) == _DATA_CRC.unpack_from(raw, s + length)[0]:
            starts.append(s)
            lengths.append(length)
        else:
            bad.append(h)
    return starts, lengths, bad


def _header_ok(raw: Raw, pos: int) -> bool:
    stored = _HEAD.unpack_from(raw, pos)[1]
    return bool(masked_crc(bytes(raw[pos : pos + 8])) == stored)


def _headers_ok(raw: Raw, buf: U8, heads: I64, compiled: ModuleType | None) -> I64:
    """Those of `heads` whose length CRC holds."""
    if compiled is None:
        return heads[np.array([_header_ok(raw, h) for h in heads.tolist()], dtype=bool)]
    ok = compiled.crc_ok(buf, heads, np.full(len(heads), 8, np.int64))
    return heads[np.frombuffer(ok, dtype=bool)]


def _resync(
    raw: Raw, buf: U8, start: int, size: int, compiled: ModuleType | None
) -> int:
    """The next offset >= start that holds a valid header, else where one could still begin."""
    lengths = _u8_view(buf, "<u8")
    last = size - HEADER
    while start <= last:
        start = _skip_zeros(buf, start, size)
        stop = min(last + 1, start + _RESYNC_WINDOW)
        if start >= stop:
            break
        cand = np.arange(start, stop, dtype=np.int64)
        cand = cand[_u8_view(buf, "<u4")[cand + 4] == 0]  # lengths below 4 GiB: cheap, most go
        cand = cand[lengths[cand] <= MAX_RECORD]
        good = _headers_ok(raw, buf, cand, compiled) if len(cand) else cand
        if len(good):
            return int(good[0])
        start = stop
    return max(start, size - HEADER + 1)


def find_header(buf: U8, start: int, size: int) -> int:
    """The first offset >= start holding a valid header (> size - HEADER if none); `buf` is
    padded with PADDING bytes past `size`. (Past a stretch of zeros: rare, so never compiled.)"""
    return _resync(buf.data, buf, start, size, None)


def _skip_zeros(buf: U8, start: int, size: int) -> int:
    """Where a header could next begin: a valid header always has a nonzero byte (a zero
    length's CRC is not zero), so none starts more than HEADER - 1 bytes before the next one."""
    step = _RESYNC_WINDOW
    pos = start
    while pos < size:
        nonzero = np.flatnonzero(buf[pos : min(size, pos + step)])
        if len(nonzero):
            return max(start, pos + int(nonzero[0]) - (HEADER - 1))
        pos += step
        step = min(step * 2, 64 << 20)
    return max(start, size - HEADER + 1)


def _zero_header(buf: U8, pos: int, size: int) -> bool:
    return size - pos >= HEADER and not buf[pos : pos + HEADER].any()


def _fits(raw: Raw, pos: int, size: int) -> bool:
    return pos + HEADER + int(_HEAD.unpack_from(raw, pos)[0]) + FOOTER <= size


def frame(raw: Raw, buf: U8, size: int, compiled: ModuleType | None) -> Frames:
    """Split raw[:size] into records; `buf` is the same bytes as uint8, padded past `size`;
    `compiled`: the kernel that walks them, None for the reference path."""
    pos = 0
    kept: list[I64] = []
    problems: list[tuple[str, int]] = []
    while True:
        if _zero_header(buf, pos, size):
            if _skip_zeros(buf, pos, size) > size - HEADER:
                break  # zeros to the end: preallocated space not written yet
            problems.append((ZERO_BYTES, pos))
            pos = _resync(raw, buf, pos, size, compiled)
            continue
        if compiled is not None:
            chained, pos = compiled.chain(buf, pos, size)
            kept.append(np.frombuffer(chained, np.int64))
        else:
            found, pos = _chain(raw, pos, size)
            kept.append(np.array(found, np.int64))
        if size - pos < HEADER or _zero_header(buf, pos, size):
            if size - pos < HEADER:
                break
            continue  # handled at the top
        length = _HEAD.unpack_from(raw, pos)[0]
        if length > MAX_RECORD or not _header_ok(raw, pos):
            too_large = _header_ok(raw, pos)
            problems.append((LENGTH_TOO_LARGE if too_large else BAD_LENGTH_CRC, pos))
            pos = _resync(raw, buf, pos + 1, size, compiled)
            continue
        # A valid header whose record runs past the data: a lie when a complete record with
        # a valid header starts after it.
        after = _resync(raw, buf, pos + 1, size, compiled)
        if after <= size - HEADER and _fits(raw, after, size):
            problems.append((LENGTH_PAST_END, pos))
            pos = after
            continue
        break
    heads = np.concatenate(kept) if kept else np.zeros(0, np.int64)
    return _check_data(raw, buf, heads, pos, problems, compiled)


def _check_data(
    raw: Raw, buf: U8, heads: I64, end: int,
    problems: list[tuple[str, int]], compiled: ModuleType | None,
) -> Frames:  # fmt: skip
    if compiled is None:
        starts, lengths, bad = _records(raw, heads.tolist())
        problems.extend((BAD_DATA_CRC, h) for h in bad)
        return Frames(np.array(starts, np.int64), np.array(lengths, np.int64), end, problems)
    # in one call, without the GIL while it checks
    found, sizes, bad = compiled.records(buf, np.ascontiguousarray(heads, np.int64))
    problems.extend((BAD_DATA_CRC, h) for h in bad)
    return Frames(np.frombuffer(found, np.int64), np.frombuffer(sizes, np.int64), end, problems)
