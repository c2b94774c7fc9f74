"""Turn the framed records of one read into a Batch: the points per tag, in written order.

Built outside the store's lock (decoding is the slow part); the store only appends it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from distcore.events.buffers import I64, U8
from distcore.events.decode import Decoded, UndecodableError, decode_event
from distcore.events.fastpath import FastScalars, decode_scalars
from distcore.events.framing import Frames
from distcore.events.schema import SCALARS_PLUGIN

F64 = npt.NDArray[np.float64]
UNDECODABLE = "undecodable record"


@dataclass
class Segment:
    """Points per tag, then (if not None) a session restart at that step for the whole run."""

    points: dict[str, tuple[I64, F64, F64]]  # tag -> (steps, wall_times, values)
    restart_at: int | None = None


@dataclass
class Batch:
    segments: list[Segment] = field(default_factory=list)
    hparams: dict[str, Any] = field(default_factory=dict)
    problems: list[tuple[str, int]] = field(default_factory=list)  # (kind, offset in chunk)
    newest_wall_time: float | None = None


@dataclass
class _Columns:
    records: list[int] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)


def decode_frames(
    raw: bytes | bytearray, buf: U8, frames: Frames, plugins: dict[str, str]
) -> Batch:
    """Decode every intact record; `plugins` (tag -> plugin of this run) is read and updated."""
    batch = Batch(problems=list(frames.problems))
    fast = decode_scalars(buf, frames.starts, frames.lengths)
    slow = np.ones(len(frames.starts), dtype=bool)
    slow[fast.index] = False
    restarts: list[tuple[int, int]] = []
    columns = _Columns()
    for i in np.flatnonzero(slow).tolist():
        start, size = int(frames.starts[i]), int(frames.lengths[i])
        try:
            event = decode_event(bytes(raw[start : start + size]), plugins)
        except UndecodableError:
            batch.problems.append((UNDECODABLE, start - 12))
            continue
        _collect(i, event, columns, restarts, batch)
    keep = _fast_keep(fast, plugins)
    batch.segments = _segments(fast, keep, columns, restarts)
    walls = [float(fast.wall_times[keep].max())] if keep.any() else []
    walls += columns.walls
    batch.newest_wall_time = max(walls) if walls else None
    return batch


def _collect(
    index: int, event: Decoded, columns: _Columns, restarts: list[tuple[int, int]], batch: Batch
) -> None:
    for tag, value in event.scalars:
        columns.records.append(index)
        columns.tags.append(tag)
        columns.steps.append(event.step)
        columns.walls.append(event.wall_time)
        columns.values.append(value)
    if event.session_start:
        restarts.append((index, event.step))
    if event.hparams:
        batch.hparams.update(event.hparams)


def _fast_keep(fast: FastScalars, plugins: dict[str, str]) -> npt.NDArray[np.bool_]:
    """simple_value always counts; a tensor only where the tag's plugin is "scalars"."""
    for tag_id in np.unique(fast.tag_ids[fast.has_metadata]).tolist():
        plugins[fast.tags[tag_id]] = SCALARS_PLUGIN
    scalar_tags = np.array([plugins.get(t) == SCALARS_PLUGIN for t in fast.tags], dtype=bool)
    if len(scalar_tags) == 0:
        return np.zeros(len(fast.index), dtype=bool)
    return np.asarray(~fast.is_tensor | scalar_tags[fast.tag_ids])


def _segments(
    fast: FastScalars,
    keep: npt.NDArray[np.bool_],
    columns: _Columns,
    restarts: list[tuple[int, int]],
) -> list[Segment]:
    names = list(fast.tags)
    ids = {t: i for i, t in enumerate(names)}
    slow_ids = [ids.setdefault(t, len(ids)) for t in columns.tags]
    names = sorted(ids, key=ids.__getitem__)
    records = np.concatenate([fast.index[keep], np.asarray(columns.records, dtype=np.int64)])
    tag_ids = np.concatenate([fast.tag_ids[keep], np.asarray(slow_ids, dtype=np.int64)])
    steps = np.concatenate([fast.steps[keep], np.asarray(columns.steps, dtype=np.int64)])
    walls = np.concatenate([fast.wall_times[keep], np.asarray(columns.walls, dtype=np.float64)])
    values = np.concatenate([fast.values[keep], np.asarray(columns.values, dtype=np.float64)])
    if columns.records:
        order = np.argsort(records, kind="stable")
        records, tag_ids = records[order], tag_ids[order]
        steps, walls, values = steps[order], walls[order], values[order]
    segments = []
    lo = 0
    for record, step in [*restarts, (None, None)]:
        hi = len(records) if record is None else int(np.searchsorted(records, record))
        part = slice(lo, hi)
        segments.append(
            Segment(_by_tag(names, tag_ids[part], steps[part], walls[part], values[part]), step)
        )
        lo = hi
    return segments


def _by_tag(
    names: list[str], tag_ids: I64, steps: I64, walls: F64, values: F64
) -> dict[str, tuple[I64, F64, F64]]:
    if len(tag_ids) == 0:
        return {}
    order = np.argsort(tag_ids, kind="stable")
    sorted_ids = tag_ids[order]
    bounds = np.flatnonzero(np.diff(sorted_ids)) + 1
    result = {}
    for group in np.split(order, bounds):
        result[names[int(tag_ids[group[0]])]] = (steps[group], walls[group], values[group])
    return result
