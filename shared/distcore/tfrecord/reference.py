"""The reference path: every record through record.decode_event, in plain Python, the points
gathered tag by tag in lists. It runs where the kernel is not built, and it is what the tests
hold the kernel's path to (every batch bit for bit)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from distcore.histograms.points import histogram_point
from distcore.tfrecord.framing import HEADER, PADDING, Frames, frame
from distcore.tfrecord.record import (
    UNDECODABLE,
    Batch,
    Segment,
    UndecodableError,
    decode_event,
    newest,
)

_Points = dict[str, tuple[list[int], list[float], list[float]]]


def decode_records(raw: bytes | bytearray, frames: Frames, plugins: dict[str, str]) -> Batch:
    """The batch of the framed records, one by one; `plugins` is read and updated. A restart
    ends the segment before its own record's points and histograms."""
    batch = Batch(problems=list(frames.problems))
    segment, points = Segment({}), _Points()
    walls: list[float] = []
    for start, size in zip(frames.starts.tolist(), frames.lengths.tolist(), strict=True):
        try:
            event = decode_event(bytes(raw[start : start + size]), plugins)
        except UndecodableError:
            batch.problems.append((UNDECODABLE, start - HEADER))
            continue
        if event.session_start:
            segment.points, segment.restart_at = _arrays(points), event.step
            batch.segments.append(segment)
            segment, points = Segment({}), {}
        for tag, value in event.scalars:
            column = points.setdefault(tag, ([], [], []))
            column[0].append(event.step)
            column[1].append(event.wall_time)
            column[2].append(value)
            walls.append(event.wall_time)
        batch.hparams.update(event.hparams or {})
        for tag, buckets in event.histograms:
            segment.histograms.append((tag, histogram_point(event.step, event.wall_time, buckets)))
    segment.points = _arrays(points)
    batch.segments.append(segment)
    batch.newest_wall_time = newest(np.array(walls, dtype=np.float64))
    return batch


def _arrays(points: _Points) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    return {
        tag: (np.array(steps, np.int64), np.array(walls, np.float64), np.array(values, np.float64))
        for tag, (steps, walls, values) in points.items()
    }


def decode_files(
    raw: bytearray, groups: Sequence[Sequence[tuple[int, int]]],
    plugins: Callable[[int], dict[str, str]],
) -> list[list[Batch | None] | None]:  # fmt: skip
    """kernel.decode_files on the reference path: each file framed and decoded alone, and a
    group taken only when each of its files is whole records, edge to edge, with no damage
    (as the kernel's tiling takes it); else None, and `plugins(g)` untouched."""
    out: list[list[Batch | None] | None] = []
    for g, spans in enumerate(groups):
        framed = []
        for base, size in spans:
            own = bytearray(raw[base : base + size]) + bytes(PADDING)
            frames = frame(own, np.frombuffer(own, np.uint8), size, None)
            if frames.end != size or frames.problems:
                out.append(None)
                break
            framed.append((own, frames))
        else:
            table = plugins(g)
            out.append([decode_records(own, frames, table) if frames.end else None
                        for own, frames in framed])  # fmt: skip
    return out
