"""The kernel's path: the framed records of one read into a Batch, the points per tag in written
order, the kernel (_kernel_scalars.c) deciding every single-scalar record in one call and
record.decode_event the rest.

Writers serialise fields in field-number order, so an event that holds one scalar has a fixed
layout with a few optional parts: wall_time, [step], summary{value{tag, simple_value | tensor[,
metadata]}}. The kernel checks each record against it; a record that fails any check is left to
decode_event, so the kernel may be strict without being wrong. The reference path (reference.py)
builds the same Batch from decode_event alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Final

import numpy as np
import numpy.typing as npt

import distcore.tfrecord.wire as s
from distcore.histograms.points import histogram_point
from distcore.histograms.records import HistogramPoint
from distcore.tfrecord.framing import F64, HEADER, I64, U8, Frames
from distcore.tfrecord.record import (
    UNDECODABLE,
    Batch,
    Decoded,
    Segment,
    UndecodableError,
    decode_event,
    newest,
)

Bools = npt.NDArray[np.bool_]
_MAX_TAG: Final = 96
_KEYS: Final = bytes(
    [s.K_WALL, s.K_STEP, s.K_SUMMARY, s.K_VALUE, s.K_TAG, s.K_SIMPLE, s.K_TENSOR, s.K_METADATA]
)


def counting_pays(names: int, items: int) -> bool:
    """Whether a pass with a count per name (bincount, the kernel's by_tag and split) costs
    less than sorting the items: the one threshold between the two, wherever either serves."""
    return names <= 4 * items + 64


@dataclass
class FastScalars:
    index: I64  # which records (positions in the batch) were decoded here
    tag_ids: I64  # into `tags`
    tags: list[str]
    steps: I64
    wall_times: F64
    values: F64
    is_tensor: Bools  # a TF2 tensor scalar (needs the tag's plugin to be "scalars")
    has_metadata: Bools  # carried the plain scalars metadata


def decode_scalars(compiled: ModuleType, buf: U8, starts: I64, lengths: I64) -> FastScalars:
    """The single-scalar records among buf's records at `starts`, with tags interned exactly."""
    index, tag_ids, tags, steps, walls, values, is_tensor, has_md = compiled.scalars(
        buf, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(lengths, np.int64),
        _KEYS, s.F32_TENSOR_PREFIX, s.F64_TENSOR_PREFIX, s.SCALARS_METADATA, _MAX_TAG,
    )  # fmt: skip
    return FastScalars(
        np.frombuffer(index, np.int64), np.frombuffer(tag_ids, np.int64), tags,
        np.frombuffer(steps, np.int64), np.frombuffer(walls, np.float64),
        np.frombuffer(values, np.float64), np.frombuffer(is_tensor, np.bool_),
        np.frombuffer(has_md, np.bool_),
    )  # fmt: skip


@dataclass
class Columns:
    """decode_event's points and histograms, in record order, before they join the kernel's."""

    records: list[int] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    histograms: list[tuple[str, HistogramPoint]] = field(default_factory=list)
    restarts: list[tuple[int, int, int]] = field(default_factory=list)  # see collect()


def decode_frames(
    raw: bytes | bytearray,
    buf: U8,
    frames: Frames,
    plugins: dict[str, str],
    compiled: ModuleType,
    fast: FastScalars | None = None,
) -> Batch:
    """Decode every intact record; `plugins` (tag -> plugin of this run) is read and updated.

    `fast`: what decode_scalars gave for these frames, decoded with other files' (many.py)."""
    batch = Batch(problems=list(frames.problems))
    if fast is None:
        fast = decode_scalars(compiled, buf, frames.starts, frames.lengths)
    slow = np.ones(len(frames.starts), dtype=bool)
    slow[fast.index] = False
    before = dict(plugins)
    timeline = _Timeline(fast)
    columns = Columns()
    for i in np.flatnonzero(slow).tolist():
        start, size = int(frames.starts[i]), int(frames.lengths[i])
        timeline.replay_fast_until(i, plugins)
        updates: list[tuple[str, str]] = []
        try:
            event = decode_event(bytes(raw[start : start + size]), plugins, updates, compiled)
        except UndecodableError:
            batch.problems.append((UNDECODABLE, start - HEADER))
            continue
        finally:
            timeline.add_slow(i, updates)
        collect(i, event, columns, batch)
    timeline.replay_fast_until(len(frames.starts), plugins)
    keep = timeline.fast_keep(before)
    batch.segments = _segments(compiled, fast, keep, columns)
    walls = fast.wall_times if keep is None else fast.wall_times[keep]
    if columns.walls:
        walls = np.concatenate([walls, np.asarray(columns.walls, dtype=np.float64)])
    batch.newest_wall_time = newest(walls)
    return batch


def collect(index: int, event: Decoded, columns: Columns, batch: Batch) -> None:
    """One event of decode_event into the columns; a restart notes the record it is at, its
    step and how many histograms came before it (they belong to the segment it ends)."""
    for tag, value in event.scalars:
        columns.records.append(index)
        columns.tags.append(tag)
        columns.steps.append(event.step)
        columns.walls.append(event.wall_time)
        columns.values.append(value)
    if event.session_start:
        columns.restarts.append((index, event.step, len(columns.histograms)))
    if event.hparams:
        batch.hparams.update(event.hparams)
    for tag, buckets in event.histograms:  # compressed here, outside the store's lock
        columns.histograms.append((tag, histogram_point(event.step, event.wall_time, buckets)))


class _Timeline:
    """Which plugin each tag had at each record, as decode_event would have seen it.

    A record's metadata sets its tag's plugin from that record on; a TF2 tensor without
    metadata counts as a scalar only where the tag's plugin is "scalars" at that point. The
    kernel's records with the scalars metadata are replayed into `plugins` in record order,
    between the records decode_event reads, so both paths see the same state.
    """

    def __init__(self, fast: FastScalars) -> None:
        self.fast = fast
        md = np.flatnonzero(fast.has_metadata)
        self._md_index = fast.index[md]  # ascending, as fast.index is
        self._md_tag_ids = fast.tag_ids[md]
        self._md_count = len(md)
        self._next = 0
        self._slow: list[tuple[int, str, str]] = []  # (record, tag, plugin)

    def replay_fast_until(self, record: int, plugins: dict[str, str]) -> None:
        """Apply the kernel's records' metadata before `record`: each sets "scalars" (TF2 writers
        attach it to every record, so only the distinct tags of the stretch are applied)."""
        if self._next == self._md_count:  # all applied (or none to apply: simple_value files)
            return
        stop = int(np.searchsorted(self._md_index, record, side="left"))
        if stop > self._next:
            for tag_id in _distinct(self._md_tag_ids[self._next : stop], len(self.fast.tags)):
                plugins[self.fast.tags[tag_id]] = s.SCALARS_PLUGIN
            self._next = stop

    def add_slow(self, record: int, updates: list[tuple[str, str]]) -> None:
        self._slow.extend((record, tag, plugin) for tag, plugin in updates)

    def fast_keep(self, before: dict[str, str]) -> Bools | None:
        """simple_value always counts; a tensor where its tag's plugin there is "scalars".
        None: every record counts (no mask to apply)."""
        fast = self.fast
        keep = ~fast.is_tensor | fast.has_metadata
        query = np.flatnonzero(~keep)
        if len(query) == 0:
            return None
        names = {t: i for i, t in enumerate(fast.tags)}
        slow_tags = [names.setdefault(tag, len(names)) for _, tag, _ in self._slow]
        upd_tag = np.concatenate([fast.tag_ids[fast.has_metadata], np.array(slow_tags, np.int64)])
        upd_at = np.concatenate([self._md_index, np.array([r for r, _, _ in self._slow], np.int64)])
        upd_scalars = np.concatenate(
            [np.ones(len(self._md_index), bool),
             np.array([p == s.SCALARS_PLUGIN for _, _, p in self._slow], bool)]
        )
        initial = np.array([before.get(t) == s.SCALARS_PLUGIN for t in fast.tags], dtype=bool)
        q_tag = fast.tag_ids[query]
        if len(upd_tag) == 0:
            keep[query] = initial[q_tag]
            return np.asarray(keep)
        # The latest update of the same tag before each queried record, by (tag, record) keys.
        span = int(max(upd_at.max(initial=0), fast.index.max(initial=0))) + 1
        order = np.argsort(upd_tag * span + upd_at, kind="stable")
        keys = (upd_tag * span + upd_at)[order]
        found = np.searchsorted(keys, q_tag * span + fast.index[query], side="left") - 1
        safe = np.maximum(found, 0)
        has_update = (found >= 0) & (upd_tag[order][safe] == q_tag)
        keep[query] = np.where(has_update, upd_scalars[order][safe], initial[q_tag])
        return np.asarray(keep)


def _distinct(ids: I64, names: int) -> list[int]:
    """np.unique(ids).tolist(), in one counting pass where the names are few."""
    if counting_pays(names, len(ids)):
        return np.flatnonzero(np.bincount(ids, minlength=names)).tolist()
    return np.unique(ids).tolist()


def _segments(
    compiled: ModuleType, fast: FastScalars, keep: Bools | None, columns: Columns
) -> list[Segment]:
    # One id per distinct name. The kernel's ids are remapped rather than trusted to be
    # distinct names: were two of its tags equal as strings, ids and names would drift apart
    # and one tag's values would be filed under another's name.
    ids: dict[str, int] = {}
    fast_ids = np.array([ids.setdefault(t, len(ids)) for t in fast.tags], dtype=np.int64)
    slow_ids = [ids.setdefault(t, len(ids)) for t in columns.tags]
    names = list(ids)
    # Every record kept (a mask costs a copy per column): the columns are the kernel's own,
    # to be copied before they are handed out (_by_tag).
    owned = keep is not None
    records, tag_ids = fast.index, fast.tag_ids
    steps, walls, values = fast.steps, fast.wall_times, fast.values
    if keep is not None:
        records, tag_ids = records[keep], tag_ids[keep]
        steps, walls, values = steps[keep], walls[keep], values[keep]
    if len(fast_ids) and len(names) - len(slow_ids) < len(fast_ids):
        tag_ids = fast_ids[tag_ids]  # (else the ids are the names' own: 0, 1, ...)
    if columns.records:  # decode_event's points, merged in record order
        records = np.concatenate([records, np.asarray(columns.records, dtype=np.int64)])
        tag_ids = np.concatenate([tag_ids, np.asarray(slow_ids, dtype=np.int64)])
        steps = np.concatenate([steps, np.asarray(columns.steps, dtype=np.int64)])
        walls = np.concatenate([walls, np.asarray(columns.walls, dtype=np.float64)])
        values = np.concatenate([values, np.asarray(columns.values, dtype=np.float64)])
        order = np.argsort(records, kind="stable")
        records, tag_ids = records[order], tag_ids[order]
        steps, walls, values = steps[order], walls[order], values[order]
        owned = True
    segments = []
    lo = h_lo = 0
    for record, step, h_hi in [*columns.restarts, (None, None, len(columns.histograms))]:
        hi = len(records) if record is None else int(np.searchsorted(records, record))
        points = _by_tag(compiled, names, tag_ids[lo:hi], steps[lo:hi], walls[lo:hi],
                         values[lo:hi], owned)  # fmt: skip
        segments.append(Segment(points, step, columns.histograms[h_lo:h_hi]))
        lo, h_lo = hi, h_hi
    return segments


def _by_tag(
    compiled: ModuleType,
    names: list[str], tag_ids: I64, steps: I64, walls: F64, values: F64, owned: bool = True
) -> dict[str, tuple[I64, F64, F64]]:
    """The points tag by tag, in written order (the kernel's by_tag); `owned`: the columns may
    be handed out as they are (else they are the kernel's, shared with other files: copied)."""
    if len(tag_ids) == 0:
        return {}
    first = int(tag_ids[0])
    if not (tag_ids != first).any():  # one tag (a file's stretch often is): nothing to sort
        if not owned:
            steps, walls, values = steps.copy(), walls.copy(), values.copy()
        return {names[first]: (steps, walls, values)}
    if not counting_pays(len(names), len(tag_ids)):  # ids made dense: a count per name used
        used, dense = np.unique(tag_ids, return_inverse=True)
        names, tag_ids = [names[i] for i in used.tolist()], dense.ravel()
    spans, *cols = compiled.by_tag(
        np.ascontiguousarray(tag_ids, np.int64), len(names),
        np.ascontiguousarray(steps, np.int64), np.ascontiguousarray(walls, np.float64),
        np.ascontiguousarray(values, np.float64),
    )  # fmt: skip
    steps = np.frombuffer(cols[0], np.int64)
    walls, values = np.frombuffer(cols[1], np.float64), np.frombuffer(cols[2], np.float64)
    return {names[t]: (steps[lo:hi], walls[lo:hi], values[lo:hi]) for t, lo, hi in spans}
