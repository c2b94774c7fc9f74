"""XSpace files built in the tests, with the reader's own message classes (distcore.profile.
schema), in the layout TensorFlow writes: a `/host:CPU` plane of thread lines, `/device:GPU:N`
planes of `Stream #N(...)` lines, names in the metadata tables, stats by metadata id."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distcore.profile.schema import classes

StatValue = int | float | str | bytes


@dataclass
class Ev:
    name: str | bytes
    offset_ps: int
    duration_ps: int
    stats: Mapping[str | bytes, StatValue] = field(default_factory=dict)


@dataclass
class LineSpec:
    name: str | bytes
    events: Iterable[Ev]
    timestamp_ns: int = 1_000


def _raw(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode()


class _Tables:
    def __init__(self, plane: Any) -> None:
        self.plane = plane
        self.events: dict[bytes, int] = {}
        self.stats: dict[bytes, int] = {}

    def event_id(self, name: bytes) -> int:
        if name not in self.events:
            key = self.events[name] = len(self.events) + 1
            entry = self.plane.event_metadata.add(key=key)
            entry.value.id, entry.value.name = key, name
        return self.events[name]

    def stat_id(self, name: bytes) -> int:
        if name not in self.stats:
            key = self.stats[name] = len(self.stats) + 1
            entry = self.plane.stat_metadata.add(key=key)
            entry.value.id, entry.value.name = key, name
        return self.stats[name]


def _set_stat(stat: Any, value: StatValue) -> None:
    if isinstance(value, bool | str):
        stat.str_value = _raw(str(value).lower() if isinstance(value, bool) else value)
    elif isinstance(value, bytes):
        stat.str_value = value
    elif isinstance(value, float):
        stat.double_value = value
    elif value < 0:
        stat.int64_value = value
    else:
        stat.uint64_value = value


def space(planes: Mapping[str | bytes, Iterable[LineSpec]], hostnames: Iterable[str] = ()) -> Any:
    """An XSpace message: plane name -> its lines."""
    message = classes()["XSpace"]()
    message.hostnames.extend(_raw(h) for h in hostnames)
    for plane_id, (plane_name, lines) in enumerate(planes.items()):
        plane = message.planes.add(id=plane_id, name=_raw(plane_name))
        tables = _Tables(plane)
        for line_id, spec in enumerate(lines):
            line = plane.lines.add(id=line_id, name=_raw(spec.name),
                                   timestamp_ns=spec.timestamp_ns)
            for ev in spec.events:
                event = line.events.add(metadata_id=tables.event_id(_raw(ev.name)),
                                        offset_ps=ev.offset_ps, duration_ps=ev.duration_ps)
                for key, value in ev.stats.items():
                    _set_stat(event.stats.add(metadata_id=tables.stat_id(_raw(key))), value)
    return message


def write(path: Path, message: Any) -> Path:
    path.write_bytes(message.SerializeToString())
    return path


MS = 1_000_000_000  # picoseconds


def training_steps(count: int, *, step_ms: int = 10, input_ms: int = 6, marker: str = "train",
                   with_r: bool = True) -> list[LineSpec]:
    """Host lines of `count` steps: a step marker, the consumer's get-next inside it, then an
    op; a sequential map stage on the pipeline's thread, and a collective."""
    python, compute, pipeline, collective = [], [], [], []
    for n in range(count):
        start = n * step_ms * MS
        stats: dict[str | bytes, StatValue] = {"step_num": n + 1}
        if with_r:
            stats["_r"] = 1
        python.append(Ev(marker, start, step_ms * MS, stats))
        python.append(Ev("IteratorGetNextOp::DoCompute", start, input_ms * MS))
        pipeline.append(Ev("Iterator::Root::Map", start, input_ms * MS,
                           {"id": 7, "parent_id": 1, "name": "MapDataset:1"}))
        compute.append(Ev("dense/MatMul:MatMul", start + (input_ms + 1) * MS, 2 * MS))
        collective.append(Ev("CollectiveReduceV2:CollectiveReduceV2",
                             start + (input_ms + 3) * MS, MS // 2))
    return [LineSpec("python", python), LineSpec("tf_Compute/1", compute),
            LineSpec("tf_data_iterator_resource/2", pipeline),
            LineSpec("collective_ops/3", collective)]


def hostile_space() -> Any:
    """A profile whose times are the int64 extremes and whose names hold escape sequences,
    undecodable bytes and control characters: it parses, and must read as clamped and escaped."""
    huge = (1 << 63) - 1
    hostile = b"\x1b]0;pwned\x07"
    lines = [
        LineSpec(b"python\x1b[2J", [
            Ev(b"train\x1b[31m", -huge, huge, {"step_num": huge, "_r": 1}),
            Ev(b"train", huge, huge, {"step_num": -5}),
            Ev("IteratorGetNextOp::DoCompute", 0, huge),
        ], timestamp_ns=huge),
        LineSpec(b"tf_data_iterator_resource/1", [
            Ev(b"Iterator::Root::Map" + hostile, 0, huge,
               {"id": 1, "parent_id": 0, "name": hostile, "parallelism": -huge,
                b"autotune\xff": b"\xff\xfe", "batch_size": float("nan")}),
        ]),
        LineSpec(b"tf_Compute/1", [Ev(b"x/" + hostile + b":Evil\x1b", 5, huge),
                                   Ev(b"op/a:MatMul", -1, -huge)]),
    ]
    gpu = [LineSpec(b"Stream #1(\x1b[31mCompute)", [Ev(hostile, huge, huge),
                                                   Ev("MemcpyH2D", 0, huge)])]
    return space({"/host:CPU": lines, "/device:GPU:0" : gpu, hostile: []},
                 hostnames=[hostile.decode()])
