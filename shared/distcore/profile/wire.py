"""Protobuf wire format, many messages at a time: the fields of every message in a buffer are
read in lock step with numpy, one field of each message a round, where a loop in Python over
millions of small messages is what a large profile's read would cost.

Only the plain case is read here: tags and values of the four wire types without groups,
varints of at most 8 bytes (values under 2**56: every clock and id a profile writes; a
negative int64 takes 10 bytes and is rare), lengths that stay inside their message, and at
most `MAX_FIELDS` fields a message. A message outside it is flagged `odd`, for its caller to
parse with the protobuf parser itself, which decides whether it is valid and what it holds;
so nothing here has to agree with that parser on anything but the plain case.

A varint is read from the 8 bytes at its position, taken as one little-endian word: the
first byte without its high bit ends it, and its 7-bit groups are packed by three shifts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
Words = npt.NDArray[np.uint64]

MAX_FIELDS: Final = 24
CHUNK: Final = 1 << 14  # messages read together: their arrays stay in the CPU's caches
PAD: Final = bytes(8)  # the end of a buffer read as words
_MAX_TAG: Final = (1 << 29) << 3  # field numbers above 2**29 - 1 are invalid
_MAX_LENGTH: Final = 1 << 31
_HIGH: Final = np.uint64(0x8080808080808080)
_ONE: Final = np.uint64(1)
_LOW7: Final = np.uint64(0x7F7F7F7F7F7F7F7F)
_ONE_BYTE: Final = np.uint64(0x80)
_LOW7_ONE: Final = np.uint64(0x7F)
_PACK: Final = (  # (shift, mask of the lane's low half, mask of the shifted high half)
    (1, np.uint64(0x007F007F007F007F), np.uint64(0x3F803F803F803F80)),
    (2, np.uint64(0x00003FFF00003FFF), np.uint64(0x0FFFC0000FFFC000)),
    (4, np.uint64(0x000000000FFFFFFF), np.uint64(0x00FFFFFFF0000000)),
)


def words(blob: bytes) -> Words:
    """The 8 bytes at each position of `blob` (which ends with PAD) as a little-endian
    word: a view, no copy."""
    return np.ndarray((len(blob) - 7,), np.dtype("<u8"), blob, 0, (1,))


def varints(buf: Words, pos: Array, limit: Array) -> tuple[Array, Array]:
    """The varints at `pos` (each to end before its `limit`): values (as int64) and lengths
    in bytes; length 0 where one runs past its limit or over 8 bytes."""
    return _decode(buf[pos], limit - pos)


def _decode(word: Words, room: Array) -> tuple[Array, Array]:
    """The varint at the start of each word, as varints() reads it."""
    stop = ~word & _HIGH
    last = stop & (~stop + _ONE)  # the high bit of the first byte that ends the varint
    lengths = np.frexp(last.astype(np.float64))[1].astype(np.int64) >> 3
    lengths[lengths > room] = 0
    value = word & (last + (last - _ONE)) & _LOW7
    for shift, low, high in _PACK:
        value = (value & low) | ((value >> np.uint64(shift)) & high)
    return value.view(np.int64), lengths


def _after_tag(
    buf: Words, word: Words, width: Array, at: Array, end: Array
) -> tuple[Array, Array]:
    """The varints that follow tags `width` bytes long: from the word the tag was read from
    where they end inside it, else read again."""
    value, size = _decode(word >> (width * 8).astype(np.uint64), end - at)
    again = np.flatnonzero(size > 8 - width)  # ended at the zeros shifted in: read on
    if again.size:
        value[again], size[again] = varints(buf, at[again], end[again])
    return value, size


@dataclass
class Fields:
    """What a lock-step read found in each message."""

    odd: Mask
    values: dict[int, Array] = field(default_factory=dict)  # varint fields: the last value
    # the round each was last set in, -1 for never: which of a oneof's fields came last
    rounds: dict[int, npt.NDArray[np.int8]] = field(default_factory=dict)
    # length-delimited fields: (message index, start, end) of each, in no particular order
    spans: dict[int, tuple[Array, Array, Array]] = field(default_factory=dict)


def read(
    buf: Words, starts: Array, ends: Array,
    varint_fields: tuple[int, ...], message_fields: tuple[int, ...] = (),
) -> Fields:
    """The last value of each of `varint_fields` (wire type 0) and the spans of each of
    `message_fields` (wire type 2) in the messages buf[starts[i]:ends[i]]; a field of another
    wire type than its own is skipped, as the parser keeps it as an unknown field."""
    count = len(starts)
    out = Fields(np.zeros(count, np.bool_))
    for number in varint_fields:
        out.values[number] = np.zeros(count, np.int64)
        out.rounds[number] = np.full(count, -1, np.int8)
    found: dict[int, list[tuple[Array, Array, Array]]] = {n: [] for n in message_fields}
    for first in range(0, count, CHUNK):
        live = np.flatnonzero(starts[first:first + CHUNK] < ends[first:first + CHUNK]) + first
        at = starts[live]
        for round_ in range(MAX_FIELDS + 1):
            if not live.size:
                break
            if round_ == MAX_FIELDS:
                out.odd[live] = True
                break
            live, at = _round(buf, live, at, ends[live], round_, out, found)
    for number, parts in found.items():
        out.spans[number] = tuple(  # type: ignore[assignment]
            np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, np.int64)
            for i in range(3))
    return out


def _round(
    buf: Words, live: Array, at: Array, end: Array, round_: int,
    out: Fields, found: dict[int, list[tuple[Array, Array, Array]]],
) -> tuple[Array, Array]:
    """One field of each live message; the messages still live and where each goes on."""
    word = buf[at]
    if not (word & _ONE_BYTE).any():  # every tag one byte long, as nearly always
        tag, width = (word & _LOW7_ONE).view(np.int64), np.ones(len(at), np.int64)
    else:
        tag, width = _decode(word, end - at)
    kind = tag & 7
    bad = (width == 0) | (width > 5) | (tag < 8) | (tag >= _MAX_TAG) | (kind == 3) | (kind == 4)
    bad |= kind > 5
    at = at + width
    after = at.copy()
    fixed = kind == 1
    after[fixed] += 8
    after[kind == 5] += 4
    spans: list[tuple[Array, Array, Array]] = []  # (chosen, begin, end), kept once checked
    for wire in (0, 2):
        chosen = np.flatnonzero((kind == wire) & ~bad)
        if not chosen.size:
            continue
        value, size = _after_tag(buf, word[chosen], width[chosen], at[chosen], end[chosen])
        bad[chosen[size == 0]] = True
        if wire == 0:
            after[chosen] += size
            _keep_values(tag[chosen] >> 3, live[chosen], value, round_, out)
        else:
            bad[chosen[value >= _MAX_LENGTH]] = True
            begin = at[chosen] + size
            after[chosen] = begin + value
            spans.append((chosen, begin, begin + value))
    bad |= after > end
    for chosen, begin, stop in spans:
        fine = ~bad[chosen]
        _keep_spans(tag[chosen[fine]] >> 3, live[chosen[fine]], begin[fine], stop[fine], found)
    out.odd[live[bad]] = True
    going = ~bad & (after < end)
    return live[going], after[going]


def _keep_values(number: Array, owner: Array, value: Array, round_: int, out: Fields) -> None:
    for wanted, values in out.values.items():
        mine = number == wanted
        if mine.any():
            values[owner[mine]] = value[mine]
            out.rounds[wanted][owner[mine]] = round_


def _keep_spans(
    number: Array, owner: Array, begin: Array, end: Array,
    found: dict[int, list[tuple[Array, Array, Array]]],
) -> None:
    for wanted, parts in found.items():
        mine = number == wanted
        if mine.any():
            parts.append((owner[mine], begin[mine], end[mine]))
