"""Masked CRC-32C, as TFRecord framing uses it: C speed per record, numpy for many at once."""

from __future__ import annotations

from typing import Final

import google_crc32c
import numpy as np
import numpy.typing as npt

import distcore.tfrecord.kernel as kernel
from distcore.tfrecord.buffers import I64, U8, U32, at

_MASK_DELTA: Final = 0xA282EAD8
_POLY: Final = 0x82F63B78  # Castagnoli, reflected
# Records this long or longer are checked one by one in C; shorter ones in a numpy batch,
# where the per-call overhead of Python would dominate.
BATCH_MAX_LENGTH: Final = 192


def mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    return mask(google_crc32c.value(data))


def _make_tables() -> npt.NDArray[np.uint32]:
    """Slicing-by-8 tables: tables[k][b] is the CRC of byte b followed by k zero bytes."""
    tables = np.zeros((8, 256), dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (_POLY if c & 1 else 0)
        tables[0, i] = c
    for k in range(1, 8):
        prev = tables[k - 1]
        tables[k] = (prev >> 8) ^ tables[0][prev & 0xFF]
    return tables


_T: Final = _make_tables()
_FF: Final = np.uint32(0xFF)


def _pair_tables() -> npt.NDArray[np.uint32]:
    """Slicing-by-8 with two bytes per lookup: four 64k-entry tables instead of eight of 256."""
    low, high = np.arange(65536) & 0xFF, np.arange(65536) >> 8
    return np.stack([_T[2 * k + 1][low] ^ _T[2 * k][high] for k in range(4)]).astype(np.uint32)


_P: Final = _pair_tables()
_FFFF: Final = np.uint32(0xFFFF)


def _bytes_step(crc: U32, byte: npt.NDArray[np.uint8]) -> U32:
    return np.asarray(_T[0][(crc ^ byte) & _FF] ^ (crc >> 8), dtype=np.uint32)


def _word_step(crc: U32, word: npt.NDArray[np.uint64]) -> U32:
    halves = word.view(np.uint32).reshape(-1, 2)  # little-endian: [low, high]
    one = crc ^ halves[:, 0]
    two = halves[:, 1]
    return np.asarray(
        _P[3][one & _FFFF] ^ _P[2][one >> 16] ^ _P[1][two & _FFFF] ^ _P[0][two >> 16],
        dtype=np.uint32,
    )


def masked_crcs(buf: U8, starts: I64, width: int) -> U32:
    """Masked CRC-32C of buf[s:s+width] for every s: odd bytes one by one, then 8 at a time."""
    crc = np.full(len(starts), 0xFFFFFFFF, dtype=np.uint32)
    head = width % 8
    for j in range(head):
        crc = _bytes_step(crc, buf[starts + j])
    words = at(buf, "<u8")
    for j in range(head, width, 8):
        crc = _word_step(crc, words[starts + j])
    crc ^= np.uint32(0xFFFFFFFF)
    return np.asarray(((crc >> 15) | (crc << 17)) + np.uint32(_MASK_DELTA), dtype=np.uint32)


def crc_ok(buf: U8, raw: bytes | bytearray, starts: I64, lengths: I64) -> npt.NDArray[np.bool_]:
    """Whether masked CRC-32C of buf[start:start+length] equals the CRC stored right after
    each record's data (the compiled kernel reads it there itself: gathering it here first
    was ~3% of a sweep's first read)."""
    compiled = kernel.ACTIVE
    if compiled is not None:
        checked = compiled.crc_ok(buf, np.ascontiguousarray(starts, np.int64),
                                  np.ascontiguousarray(lengths, np.int64))  # fmt: skip
        return np.frombuffer(checked, dtype=bool)
    ok = np.zeros(len(starts), dtype=bool)
    if len(starts) == 0:
        return ok
    stored = at(buf, "<u4")[starts + lengths]
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    bounds = np.flatnonzero(np.diff(sorted_lengths)) + 1
    for group in np.split(order, bounds):
        width = int(lengths[group[0]])
        if width < BATCH_MAX_LENGTH and len(group) >= 4:
            ok[group] = masked_crcs(buf, starts[group], width) == stored[group]
        else:
            for i in group.tolist():
                s = int(starts[i])
                ok[i] = masked_crc(bytes(raw[s : s + width])) == int(stored[i])
    return ok
