"""An XSpace file's events as arrays, a plane at a time: the bulk decoder.

The protobuf parser reads the file's frame (planes, lines, the metadata tables, with the
same checks as decode.parse) and hands each line's events over as bytes; their fields are
then read many at a time (wire.py), where building a message object an event is what a large
profile's read costs. An event the lock-step read leaves aside (a negative offset, groups,
a malformed field) is parsed by the protobuf parser itself, framed as the file frames it, so
the file is unreadable exactly where decode.parse says it is, and each event holds what the
parser would have made of it. decode.py stays the reference the tests hold this to.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from distcore.profile import decode, wire
from distcore.profile.schema import classes, raw_xspace_class
from distcore.profile.wire import Array, Mask

GROUP: Final = 1 << 19  # events whose times are worked on together


@dataclass(frozen=True)
class LineEvents:
    name: str
    base_ps: int
    first: int  # the line's events are [first, last) of its plane's arrays
    last: int


class PlaneEvents:
    """One plane's metadata (a decode.Plane) and every event of its lines as arrays."""

    def __init__(self, message: Any) -> None:
        metadata = type(message)(name=message.name)  # a copy, so the parsed file can go
        metadata.event_metadata.extend(message.event_metadata)
        metadata.stat_metadata.extend(message.stat_metadata)
        self.plane = decode.Plane(metadata)
        self.name = self.plane.name
        self.lines: list[LineEvents] = []
        blobs: list[bytes] = []
        lengths: list[Array] = []
        first = 0
        for line in decode.lines(message):
            events = list(line.events)  # the parser makes a bytes object an event, once
            lengths.append(np.fromiter(map(len, events), np.int64, count=len(events)))
            blobs.append(b"".join(events))
            self.lines.append(LineEvents(line.name, line.base_ps, first, first + len(events)))
            first += len(events)
        self.blob = b"".join([*blobs, wire.PAD])
        del blobs
        self.ends = np.cumsum(np.concatenate(lengths)) if lengths else np.zeros(0, np.int64)
        self.starts = self.ends - np.concatenate(lengths) if lengths else self.ends
        counts = [line.last - line.first for line in self.lines]
        self.line_of = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        self.bases = np.array([line.base_ps for line in self.lines], np.uint64)
        self._messages: dict[int, Any] = {}
        self._read(wire.words(self.blob))

    def _read(self, buf: Any) -> None:
        fields = wire.read(buf, self.starts, self.ends, (1, 2, 3, 5), (4,))
        owner, begin, end = fields.spans[4]
        stats = wire.read(buf, begin, end, (1,))
        fields.odd[owner[stats.odd]] = True
        self.metadata_id = fields.values[1]
        offset_set = fields.rounds[2] > fields.rounds[5]  # one oneof: the last one set holds
        self.offset_ps = np.where(offset_set, fields.values[2], 0)
        self.duration_ps = fields.values[3]
        self.counted: Mask = ~((fields.rounds[5] > fields.rounds[2]) & (fields.values[5] != 0))
        self._stat_owner, self._stat_id = owner, stats.values[1]
        self._odd = np.flatnonzero(fields.odd)
        del fields  # the other fields' arrays
        for index in self._odd.tolist():
            self._exact(index)

    def _exact(self, index: int) -> None:
        """The parser's reading of one event the lock-step read left aside."""
        event = _parse_event(self.blob[self.starts[index]:self.ends[index]])
        self._messages[index] = event
        self.metadata_id[index] = event.metadata_id
        self.offset_ps[index] = event.offset_ps
        self.duration_ps[index] = event.duration_ps
        self.counted[index] = not event.num_occurrences

    def events(self, indices: list[int]) -> list[Any]:
        """Those events as messages (for the few whose stats are read), parsed together."""
        pending = [i for i in indices if i not in self._messages]
        if pending:
            frames = b"".join(_frame(4, self.blob[self.starts[i]:self.ends[i]]) for i in pending)
            line = classes()["XLine"].FromString(frames)
            self._messages.update(zip(pending, line.events, strict=True))
        return [self._messages[i] for i in indices]

    def with_stat(self, stat_id: int) -> Mask:
        """Which events hold a stat of metadata id `stat_id`."""
        found = np.zeros(len(self.starts), np.bool_)
        found[self._stat_owner[self._stat_id == stat_id]] = True
        found[self._odd] = [
            any(s.metadata_id == stat_id for s in self._messages[i].stats)
            for i in self._odd.tolist()
        ]
        return found

    def groups(self) -> Iterator[tuple[int, int]]:
        """The lines as ranges [first, last) of about GROUP events or fewer (a longer line
        alone), in order: the arrays of one range at a time stay small."""
        first, held = 0, 0
        for number, line in enumerate(self.lines):
            size = line.last - line.first
            if held and held + size > GROUP:
                yield first, number
                first, held = number, 0
            held += size
        if first < len(self.lines):
            yield first, len(self.lines)

    def spans(self, lines: Mask, group: tuple[int, int]) -> tuple[Array, Array, Array, Array]:
        """(indices, line numbers, start_ps, end_ps) of the events of the lines chosen in a
        group, in order, their times clamped as Line.spans clamps them; events with occurrence
        counts are left out."""
        low, high = self.lines[group[0]].first, self.lines[group[1] - 1].last
        index = np.flatnonzero(self.counted[low:high] & lines[self.line_of[low:high]]) + low
        line = self.line_of[index]
        offset = np.clip(self.offset_ps[index], 0, decode.MAX_PS).astype(np.uint64)
        duration = np.clip(self.duration_ps[index], 0, decode.MAX_PS).astype(np.uint64)
        start = self.bases[line] + offset
        end = start + duration
        over = end > np.uint64(decode.MAX_PS)
        start[over] = np.minimum(start[over], np.uint64(decode.MAX_PS))
        end[over] = decode.MAX_PS
        return index, line, start.astype(np.int64), end.astype(np.int64)


def _frame(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _parse_event(data: bytes) -> Any:
    # Framed as XSpace > XPlane > XLine, so the parser sees it at the depth the file has it.
    space = decode.parse(_frame(1, _frame(3, _frame(4, data))))
    return space.planes[0].lines[0].events[0]


def parse(data: bytes) -> Any:
    """The XSpace in `data`, events as bytes, or ProfileUnreadable."""
    try:
        return raw_xspace_class().FromString(data)
    except Exception as exc:  # protobuf's DecodeError, or its C parser's RuntimeError
        raise decode.ProfileUnreadable(
            f"not an XSpace protobuf ({decode.first_line(exc)})") from None


def planes(space: Any) -> list[PlaneEvents]:
    return [PlaneEvents(message) for message in space.planes]
