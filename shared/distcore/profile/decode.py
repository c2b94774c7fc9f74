"""An XSpace file's bytes as planes, lines and events with their times, names and stats.

Everything here reads outside data: durations, offsets and timestamps are clamped into a
range where arithmetic on them stays meaningful, names are decoded with `surrogateescape`
(escaped only where they leave the package, see summary.py), and a message that does not parse
is a `ProfileUnreadable` with the parser's reason. Events stay protobuf messages, an object
an event: this is the reference decoder, which the bulk decoder (bulk.py) that summaries are
read with is tested against.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from distcore.profile.schema import xspace_class

# A picosecond clock: 2**62 ps is about 53 days, past any profile's span or start.
MAX_PS: Final = 1 << 62
HOST_PLANE: Final = "/host:CPU"
GPU_PLANE_PREFIX: Final = "/device:GPU:"

StatValue = int | float | str


class ProfileUnreadable(Exception):
    """The file is no profile this reader can use; the message says why, in one line."""


def clamp(value: int, low: int = 0, high: int = MAX_PS) -> int:
    return low if value < low else high if value > high else value


def text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def parse(data: bytes) -> Any:
    """The XSpace message in `data`, or ProfileUnreadable."""
    try:
        return xspace_class().FromString(data)
    except Exception as exc:  # protobuf's DecodeError, or its C parser's RuntimeError
        raise ProfileUnreadable(f"not an XSpace protobuf ({first_line(exc)})") from None


def first_line(exc: Exception) -> str:
    # protobuf names the message type first ("Error parsing message with type '...': ")
    lines = str(exc).strip().rpartition("': ")[2].splitlines()
    return lines[0][:200] if lines else type(exc).__name__


@dataclass(frozen=True)
class Line:
    name: str
    base_ps: int  # the line's timestamp, in ps: event offsets count from it
    events: Any  # the repeated XEvent field

    def spans(self) -> Iterator[tuple[int, int, Any]]:
        """(start_ps, end_ps, event) for every event, clamped; events with occurrence counts
        (aggregated metrics, no place in time) are skipped."""
        base = self.base_ps
        for event in self.events:
            if event.num_occurrences:
                continue
            offset, duration = event.offset_ps, event.duration_ps
            if not (0 <= offset <= MAX_PS and 0 <= duration <= MAX_PS):
                offset, duration = clamp(offset), clamp(duration)
            start = base + offset
            end = start + duration
            if end > MAX_PS:
                start, end = min(start, MAX_PS), MAX_PS
            yield start, end, event


class Plane:
    """One XPlane with its metadata tables as dicts (the last entry wins, as in a map)."""

    def __init__(self, message: Any) -> None:
        self.message = message
        self.name = text(message.name)
        self.event_names: dict[int, str] = {}
        self._event_metadata: dict[int, Any] = {}
        for entry in message.event_metadata:
            self.event_names[entry.key] = text(entry.value.name)
            self._event_metadata[entry.key] = entry.value
        self.stat_names: dict[int, str] = {
            entry.key: text(entry.value.name) for entry in message.stat_metadata
        }
        self._stat_ids = {name: key for key, name in self.stat_names.items()}

    def stat_id(self, name: str) -> int | None:
        return self._stat_ids.get(name)

    def lines(self) -> Iterator[Line]:
        return lines(self.message)

    def event_name(self, event: Any) -> str:
        return self.event_names.get(event.metadata_id, "")

    def stats(self, event: Any) -> dict[str, StatValue]:
        """The event's stats by name, over its metadata's (the event's own win)."""
        out: dict[str, StatValue] = {}
        metadata = self._event_metadata.get(event.metadata_id)
        if metadata is not None:
            out.update(self._values(metadata.stats))
        out.update(self._values(event.stats))
        return out

    def _values(self, stats: Any) -> Iterator[tuple[str, StatValue]]:
        for stat in stats:
            name = self.stat_names.get(stat.metadata_id)
            if name is not None:
                yield name, self._value(stat)

    def _value(self, stat: Any) -> StatValue:
        kind = stat.WhichOneof("value")
        if kind in ("str_value", "bytes_value"):
            return text(getattr(stat, kind)[:1000])
        if kind == "ref_value":  # a string kept once in the stat metadata table
            return self.stat_names.get(stat.ref_value, "")
        if kind is None:
            return 0
        value: int | float = getattr(stat, kind)
        return value


def lines(plane: Any) -> Iterator[Line]:
    """The lines of an XPlane message."""
    for line in plane.lines:
        name = text(line.display_name or line.name)
        yield Line(name, clamp(line.timestamp_ns, 0, MAX_PS // 1000) * 1000, line.events)


def planes(space: Any) -> list[Plane]:
    return [Plane(message) for message in space.planes]


def hostnames(space: Any) -> list[str]:
    return [text(name) for name in space.hostnames]
