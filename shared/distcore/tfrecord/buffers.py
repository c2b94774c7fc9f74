"""Typed, unaligned numpy views over a byte buffer (one element per byte offset)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

# numpy array aliases (the protobuf wire types are fields.WIRE_*).
U8 = npt.NDArray[np.uint8]
U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
# Zero bytes after the data, so that fixed-width reads near the end stay inside the buffer.
PADDING = 16


def at(buf: U8, dtype: str) -> npt.NDArray[Any]:
    """`at(buf, "<u8")[i]` is the little-endian u64 that starts at byte i, for every i."""
    dt = np.dtype(dtype)
    return np.ndarray((len(buf) - dt.itemsize + 1,), dtype=dt, buffer=buf, strides=(1,))


def varints(buf: U8, pos: I64) -> tuple[npt.NDArray[np.uint64], I64]:
    """Decode the varint at each position: (values, byte lengths); length 0 means malformed.

    Byte by byte, only over the varints still going: most are one or two bytes long.
    """
    pos = np.minimum(pos, len(buf) - PADDING)
    byte = buf[pos]
    value = (byte & 0x7F).astype(np.uint64)
    length = np.ones(len(pos), dtype=np.int64)
    going = np.flatnonzero(byte >= 0x80)
    length[going] = 0
    for j in range(1, 10):
        if len(going) == 0:
            break
        byte = buf[pos[going] + j]
        value[going] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * j)
        done = byte < 0x80
        length[going[done]] = j + 1
        going = going[~done]
    return value, length


def equals(buf: U8, pos: I64, pattern: bytes) -> Bools:
    """Whether buf[p:p+len(pattern)] == pattern at each position (compared in 8-byte words)."""
    result = np.ones(len(pos), dtype=bool)
    size = len(pattern)
    if size < 8:
        for j, byte in enumerate(pattern):
            result &= buf[pos + j] == byte
        return result
    words = at(buf, "<u8")
    for off in [*range(0, size - 7, 8), size - 8]:
        want = np.frombuffer(pattern[off : off + 8], dtype="<u8")[0]
        result &= words[pos + off] == want
    return result


def clamp(values: npt.NDArray[np.uint64], limit: int) -> I64:
    """Lengths read from untrusted bytes, made safe to add to offsets."""
    return np.minimum(values, np.uint64(limit)).astype(np.int64)
