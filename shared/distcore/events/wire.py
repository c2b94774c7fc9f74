"""A minimal protobuf wire walker: enough to find fields by number and skip the rest unparsed."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final

from distcore.events.schema import I32, I64, LEN, VARINT

_F64: Final = struct.Struct("<d")
_F32: Final = struct.Struct("<f")


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise WireError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value): ints for varints, raw bytes for everything else."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == VARINT:
            value, pos = read_varint(data, pos)
            yield number, wire_type, value
            continue
        if wire_type == LEN:
            size, pos = read_varint(data, pos)
        elif wire_type in (I64, I32):
            size = 8 if wire_type == I64 else 4
        else:
            raise WireError(f"unsupported wire type {wire_type}")
        if number == 0 or pos + size > end:
            raise WireError("field runs past the end of the message")
        yield number, wire_type, data[pos : pos + size]
        pos += size


def as_double(raw: int | bytes) -> float:
    if not isinstance(raw, bytes):
        raise WireError("expected a fixed64")
    return float(_F64.unpack(raw)[0])


def as_float(raw: int | bytes) -> float:
    if not isinstance(raw, bytes):
        raise WireError("expected a fixed32")
    return float(_F32.unpack(raw)[0])


def as_int64(raw: int | bytes) -> int:
    if isinstance(raw, bytes):
        raise WireError("expected a varint")
    raw &= (1 << 64) - 1  # a 10-byte varint may carry bits past 64: protobuf drops them
    return raw - (1 << 64) if raw >= 1 << 63 else raw


def as_bytes(raw: int | bytes) -> bytes:
    if not isinstance(raw, bytes):
        raise WireError("expected a length-delimited field")
    return raw
