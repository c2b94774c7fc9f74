"""Helpers for the event reader's tests: TFRecord framing and events built with TB's protos."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

from tensorboard.compat.proto import event_pb2, summary_pb2

from distcore.events import RunStore, load_once
from distcore.events.crc import masked_crc
from distcore.events.model import RunSnapshot


def record(data: bytes) -> bytes:
    """One TFRecord: length, masked CRC of the length, data, masked CRC of the data."""
    length = struct.pack("<Q", len(data))
    header = length + struct.pack("<I", masked_crc(length))
    return header + data + struct.pack("<I", masked_crc(data))


def scalar_event(tag: str, step: int, value: float, wall_time: float = 1000.0) -> bytes:
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
    return event_pb2.Event(wall_time=wall_time, step=step, summary=summary).SerializeToString()


def session_start(step: int, wall_time: float = 1000.0) -> bytes:
    log = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
    return event_pb2.Event(wall_time=wall_time, step=step, session_log=log).SerializeToString()


def scalar_records(tag: str, points: Iterable[tuple[int, float]]) -> bytes:
    return b"".join(record(scalar_event(tag, step, value)) for step, value in points)


def only_run(root: Path, store: RunStore | None = None) -> RunSnapshot:
    runs = store.snapshot() if store is not None else load_once([root])
    assert len(runs) == 1, [r.name for r in runs]
    return runs[0]


def steps_values(run: RunSnapshot, tag: str) -> list[tuple[int, float]]:
    series = run.scalars[tag]
    return list(zip(series.steps, series.values, strict=True))
