"""TFRecord framing: u64 length, masked CRC of the length, data, masked CRC of the data.

`frame()` finds the intact records in a buffer. A truncated last record is "not yet": `end` stops
before it, so the caller reads it again once the file grows. A bad length CRC means the framing
is lost: the reader searches forward for the next header whose CRC checks out (it only ever moves
forward, so it terminates). A bad data CRC drops that record only. A header whose record would
run past the data is "not yet" only while nothing valid follows it: when a complete, valid
record starts after it, its length was a lie (damage, or a writer that died mid-record and was
followed by another), so the reader resyncs there instead of waiting forever. Zero-filled
stretches (preallocated or sparse files) are skipped with one vectorised search.

Records are followed by the compiled kernel where it is built (kernel.py), else by the numpy
chains below; both find the same records (tests/core/test_tfrecord_kernel.py).
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field
from typing import Final

import numpy as np

import distcore.tfrecord.kernel as kernel
from distcore.tfrecord.buffers import I64, U8, at
from distcore.tfrecord.crc import crc_ok, masked_crc, masked_crcs

HEADER: Final = 12
FOOTER: Final = 4
# No scalar, image or audio record comes near this; a larger length is damage, never allocated.
MAX_RECORD: Final = 256 << 20
_RESYNC_WINDOW: Final = 1 << 20
_HEAD = struct.Struct("<QI")
# The vectorised chain looks at this much at a time (its arrays are a few bytes per byte), then
# the stretch follower gets another go.
_WINDOW: Final = 256 << 10
_MIN_RUN: Final = 16

BAD_LENGTH_CRC: Final = "bad length CRC"
BAD_DATA_CRC: Final = "bad data CRC"
LENGTH_PAST_END: Final = "record length past the end of the file"
LENGTH_TOO_LARGE: Final = "record length over 256 MiB"
ZERO_BYTES: Final = "zero bytes skipped"


@dataclass
class Frames:
    starts: I64  # offset of each intact record's data
    lengths: I64
    end: int  # everything before this offset is consumed (read or skipped)
    problems: list[tuple[str, int]] = field(default_factory=list)  # (kind, offset)


def _chain(raw: bytes | bytearray, pos: int, size: int) -> tuple[array[int], int]:
    """Follow the lengths from `pos` while whole records fit; trusts them (checked after)."""
    unpack = _HEAD.unpack_from
    heads = array("q")
    push = heads.append
    last = size - HEADER
    while pos <= last:
        length, crc = unpack(raw, pos)
        end = pos + length + HEADER + FOOTER
        if end > size or length > MAX_RECORD or not (length or crc):
            break  # (a zero header is never valid: zero-filled space is skipped elsewhere)
        push(pos)
        pos = end
    return heads, pos


def _chain_runs(buf: U8, pos: int, size: int) -> tuple[list[I64], int]:
    """Follow stretches of back-to-back records of one length (a writer's usual output) with
    strided views: the headers of a stretch are byte-identical, so one CRC check and two
    strided comparisons cover all of them. Stops where stretches get shorter than _MIN_RUN."""
    kept: list[I64] = []
    while size - pos >= HEADER:
        length = int(at(buf, "<u8")[pos])
        stride = length + HEADER + FOOTER
        fits = (size - pos) // stride if length <= MAX_RECORD else 0
        if fits < _MIN_RUN or not _header_plausible(buf, pos):
            break
        count = _same_headers(buf, pos, stride, fits)
        if count < _MIN_RUN:
            break
        kept.append(pos + stride * np.arange(count, dtype=np.int64))
        pos += stride * count
    return kept, pos


def _same_headers(buf: U8, pos: int, stride: int, fits: int) -> int:
    """How many records from pos, `stride` apart, have the header at pos (checked in blocks
    that double, so a short stretch costs little)."""
    head = bytes(buf[pos : pos + HEADER])
    want_len, want_crc = _HEAD.unpack(head)
    done, block = 0, _MIN_RUN
    while done < fits:
        count = min(block, fits - done)
        at_pos = pos + done * stride
        lengths = np.ndarray((count,), "<u8", buffer=buf, offset=at_pos, strides=(stride,))
        crcs = np.ndarray((count,), "<u4", buffer=buf, offset=at_pos + 8, strides=(stride,))
        same = (lengths == want_len) & (crcs == want_crc)
        if not same.all():
            return done + int(np.argmin(same))
        done += count
        block *= 4
    return done


def _chain_vectorised(buf: U8, pos: int, size: int) -> tuple[I64, int] | None:
    """The same chain without a Python step per record, or None where it cannot vouch for it.

    A header has four zero bytes (a length below 4 GiB), and the record it starts ends where
    the next header starts. The positions that pass both (plus the record the last one points
    to) and have valid CRCs are the chain exactly when each one's record ends where the next
    begins and the last runs past the last possible header. Data that happens to hold a valid
    header, or any damage, breaks that and falls back to _chain.
    """
    last = size - HEADER
    if last < pos:
        return np.zeros(0, np.int64), pos
    cand = np.flatnonzero(at(buf, "<u4")[pos + 4 : last + 5] == 0) + pos
    if len(cand) == 0 or cand[0] != pos:
        return None
    ends = cand + at(buf, "<u4")[cand].astype(np.int64) + HEADER + FOOTER
    is_cand = np.zeros(last + 2 - pos, dtype=bool)
    is_cand[cand - pos] = True
    linked = is_cand[np.minimum(ends, last + 1) - pos]
    chain = np.r_[cand[linked], ends[linked][-1:]] if linked.any() else cand[:1]
    chain = chain[_headers_ok(buf, chain)]
    if len(chain) == 0 or chain[0] != pos:
        return None
    chain_ends = chain + at(buf, "<u8")[chain].astype(np.int64) + HEADER + FOOTER
    if not np.array_equal(chain_ends[:-1], chain[1:]) or chain_ends[-1] <= last:
        return None
    if chain_ends[-1] <= size and chain_ends[-1] - chain[-1] <= MAX_RECORD:
        return chain, int(chain_ends[-1])
    return chain[:-1], int(chain[-1])


def _headers_ok(buf: U8, heads: I64) -> np.ndarray:
    stored = at(buf, "<u4")[heads + 8]
    return np.asarray(masked_crcs(buf, heads, 8) == stored)


def _resync(buf: U8, start: int, size: int) -> int:
    """The next offset >= start that holds a valid header, else where one could still begin."""
    lengths = at(buf, "<u8")
    last = size - HEADER
    while start <= last:
        start = _skip_zeros(buf, start, size)
        stop = min(last + 1, start + _RESYNC_WINDOW)
        if start >= stop:
            break
        cand = np.arange(start, stop, dtype=np.int64)
        cand = cand[at(buf, "<u4")[cand + 4] == 0]  # lengths below 4 GiB: cheap, most go
        cand = cand[lengths[cand] <= MAX_RECORD]
        good = cand[_headers_ok(buf, cand)] if len(cand) else cand
        if len(good):
            return int(good[0])
        start = stop
    return max(start, size - HEADER + 1)


def find_header(buf: U8, start: int, size: int) -> int:
    """The first offset >= start holding a valid header (> size - HEADER if none)."""
    return _resync(buf, start, size)


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


def _fits(buf: U8, pos: int, size: int) -> bool:
    return pos + HEADER + int(at(buf, "<u8")[pos]) + FOOTER <= size


def _lied_about_length(buf: U8, pos: int, size: int) -> int | None:
    """For a valid header whose record runs past the data: where a complete record with a
    valid header starts after it, if one does (then this header's length was a lie)."""
    after = _resync(buf, pos + 1, size)
    return after if after <= size - HEADER and _fits(buf, after, size) else None


def frame(raw: bytes | bytearray, buf: U8, size: int) -> Frames:
    """Split raw[:size] into records; `buf` is the same bytes as uint8, padded past `size`."""
    pos = 0
    kept: list[I64] = []
    problems: list[tuple[str, int]] = []
    while True:
        if _zero_header(buf, pos, size):
            if _skip_zeros(buf, pos, size) > size - HEADER:
                break  # zeros to the end: preallocated space not written yet
            problems.append((ZERO_BYTES, pos))
            pos = _resync(buf, pos, size)
            continue
        compiled = kernel.ACTIVE
        if compiled is not None:  # _chain in C, every header's CRC checked on the way
            chained, stop = compiled.chain(buf, pos, size)
            heads, bad = np.frombuffer(chained, np.int64), np.zeros(0, np.int64)
        else:
            runs, stop = _chain_runs(buf, pos, size)
            if runs:
                kept.extend(runs)
                pos = stop
                continue
            heads, stop, bad = _chain_numpy(raw, buf, pos, size)
        if len(bad):
            kept.append(heads[: bad[0]])
            pos = int(heads[bad[0]])
            if not _zero_header(buf, pos, size):  # zeros are handled at the top
                problems.append((BAD_LENGTH_CRC, pos))
                pos = _resync(buf, pos + 1, size)
            continue
        kept.append(heads)
        moved, pos = stop > pos, stop
        if _zero_header(buf, pos, size):
            continue  # handled at the top
        if moved and size - pos >= HEADER and _header_plausible(buf, pos) and _fits(buf, pos, size):
            continue  # the window ended inside the data
        if size - pos >= HEADER and not _header_plausible(buf, pos):
            crc_ok = bool(_headers_ok(buf, np.array([pos], dtype=np.int64))[0])
            problems.append((LENGTH_TOO_LARGE if crc_ok else BAD_LENGTH_CRC, pos))
            pos = _resync(buf, pos + 1, size)
            continue
        if size - pos >= HEADER and not _fits(buf, pos, size):
            after = _lied_about_length(buf, pos, size)
            if after is not None:
                problems.append((LENGTH_PAST_END, pos))
                pos = after
                continue
        break
    heads = np.concatenate(kept) if kept else np.zeros(0, np.int64)
    return _check_data(raw, buf, heads, pos, problems)


def _chain_numpy(raw: bytes | bytearray, buf: U8, pos: int, size: int) -> tuple[I64, int, I64]:
    """(heads, where the chain stops, positions among them with a bad header CRC)."""
    fast = _chain_vectorised(buf, pos, min(size, pos + _WINDOW))
    if fast is not None and fast[1] == pos and size - pos > _WINDOW:
        fast = None  # one record larger than the window: follow it one by one
    if fast is not None:
        return fast[0], fast[1], np.zeros(0, np.int64)  # every header was checked already
    chained, stop = _chain(raw, pos, size)
    heads = np.frombuffer(chained, np.int64) if len(chained) else np.zeros(0, np.int64)
    bad = np.flatnonzero(~_headers_ok(buf, heads)) if len(heads) else heads
    return heads, stop, bad


def _header_plausible(buf: U8, pos: int) -> bool:
    """A header that stopped the chain: fine if its CRC holds and its length is sane. One
    header: checked in C (a numpy batch of one costs a hundred times more)."""
    head = bytes(buf[pos : pos + HEADER])
    length, stored = _HEAD.unpack(head)
    return bool(length <= MAX_RECORD and masked_crc(head[:8]) == stored)


def _check_data(
    raw: bytes | bytearray, buf: U8, heads: I64, end: int, problems: list[tuple[str, int]]
) -> Frames:
    compiled = kernel.ACTIVE
    if compiled is not None:  # the same in one call, without the GIL while it checks
        starts, lengths, bad = compiled.records(buf, np.ascontiguousarray(heads, np.int64))
        problems.extend((BAD_DATA_CRC, h) for h in bad)
        return Frames(np.frombuffer(starts, np.int64), np.frombuffer(lengths, np.int64), end,
                      problems)  # fmt: skip
    lengths = at(buf, "<u8")[heads].astype(np.int64)
    starts = heads + HEADER
    ok = crc_ok(buf, raw, starts, lengths)
    problems.extend((BAD_DATA_CRC, int(h)) for h in heads[~ok].tolist())
    return Frames(starts[ok], lengths[ok], end, problems)
