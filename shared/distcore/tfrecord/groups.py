"""Group decoding: the scalar events one writer produces share their shape.

Such an event is wall_time, [step], then a summary whose bytes are the same for every event of
that tag except the value: `2a .. 0a .. 0a len tag 15 VALUE` (simple_value), or the TF2 tensor
`.. 42 .. 08 01 12 00 22 04 VALUE [4a 0b 0a 09 0a 07 "scalars"]`. So a record's shape is the
summary bytes before its 4-byte value (and whether the scalars metadata follows it). Records
are grouped by shape with a hash and an exact comparison of those bytes; one representative per
group is checked by the field-by-field fast path (fastpath.py); every member then decodes with a
few gathers at offsets fixed by its end. Whatever does not fall into a checked group goes to the
field-by-field path, and what that refuses, to the general decoder: the result is exactly the
fast path's (tested against the per-record decoder).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

import distcore.tfrecord.fields as s
import distcore.tfrecord.kernel as kernel
from distcore.tfrecord.buffers import I64, U8, Bools
from distcore.tfrecord.fastpath import FastScalars, decode_scalars

_MD_FIELD: Final = bytes([s.K_METADATA, len(s.SCALARS_METADATA)]) + s.SCALARS_METADATA
_F32: Final = s.F32_TENSOR_PREFIX  # dtype, empty shape, content key and length
_MAX_RECORD: Final = 256  # longer records (long tags) are left to the field-by-field path
_MIN_RUN: Final = 32  # shorter stretches cost more to group than they save
_SMALL_KEYS: Final = 1 << 16


def decode_grouped(buf: U8, starts: I64, lengths: I64) -> FastScalars:
    """What decode_scalars(buf, starts, lengths) returns, decoded group by group."""
    n = len(starts)
    if n < _MIN_RUN or kernel.ACTIVE is not None:  # compiled, one by one beats grouping
        return decode_scalars(buf, starts, lengths)
    runs = [run for f, c in _runs(starts, lengths) if (run := _plan(buf, starts, f, c, lengths))]
    if not runs:  # nothing to group (e.g. tags of different lengths in turn)
        return decode_scalars(buf, starts, lengths)
    in_run = np.zeros(n, dtype=bool)
    for run in runs:
        in_run[run.first : run.first + run.count] = True
    # One field-by-field decode for every representative and every record outside a run.
    ask = np.sort(np.concatenate([np.flatnonzero(~in_run), *[r.first + r.reps for r in runs]]))
    checked = decode_scalars(buf, starts[ask], lengths[ask])
    slot = np.full(n, -1, dtype=np.int64)
    slot[ask[checked.index]] = np.arange(len(checked.index))
    out = _Columns(n)
    alone = np.flatnonzero(~in_run & (slot >= 0))
    out.take(alone, slot[alone], checked)
    for run in runs:
        _decode_run(buf, run, slot, checked, out)
    left = np.flatnonzero(in_run & (out.source < 0))
    if len(left):  # members of refused groups: field by field after all
        again = decode_scalars(buf, starts[left], lengths[left])
        out.take(left[again.index], np.arange(len(again.index)), again)
    return out.result(checked)


def _runs(starts: I64, lengths: I64) -> list[tuple[int, int]]:
    """(first record, count) of each stretch of back-to-back records of one length."""
    joined = (lengths[1:] == lengths[:-1]) & (starts[1:] == starts[:-1] + lengths[:-1] + 16)
    edges = np.flatnonzero(np.diff(np.r_[0, joined.astype(np.int8), 0]))
    firsts, lasts = edges[0::2], edges[1::2]  # joined[firsts:lasts] are all True
    keep = lasts - firsts + 1 >= _MIN_RUN
    return list(zip(firsts[keep].tolist(), (lasts - firsts + 1)[keep].tolist(), strict=True))


@dataclass
class _Run:
    first: int
    count: int
    base: int  # offset of the first record's data
    size: int
    layout: _Layout
    rows: np.ndarray  # (count, size) strided view of the records' data
    reps: I64  # row of each group's first record
    group: I64  # each row's group


def _plan(buf: U8, starts: I64, first: int, count: int, lengths: I64) -> _Run | None:
    """Group a run's records by the bytes that may not differ within a tag."""
    size, base = int(lengths[first]), int(starts[first])
    layout = _layout(buf, base, size)
    if layout is None or size > _MAX_RECORD:
        return None
    varying = _varying_columns(buf, base, size, count)
    shape_cols = varying[~layout.free_columns(size)[varying]]
    if len(shape_cols) > 8:
        return None  # too irregular for one key: the field-by-field path takes it
    rows = np.lib.stride_tricks.as_strided(
        buf[base:], shape=(count, size), strides=(size + 16, 1), writeable=False
    )
    reps, group = _groups(_pack(rows, shape_cols))
    return _Run(first, count, base, size, layout, rows, reps, group)


def _decode_run(buf: U8, run: _Run, slot: I64, checked: FastScalars, out: _Columns) -> None:
    """Decode the members of the run's accepted groups: a few strided reads for all."""
    layout = run.layout
    rep_slot = slot[run.first + run.reps]
    good = rep_slot >= 0
    for g in np.flatnonzero(good).tolist():
        k = int(rep_slot[g])
        # The representative is a scalar event of exactly the layout guessed from the first.
        same = _layout(buf, int(run.base + run.reps[g] * (run.size + 16)), run.size) == layout
        kind = bool(checked.is_tensor[k]) == layout.tensor and (
            not layout.tensor or bool(checked.has_metadata[k]) == layout.tail
        )
        good[g] = same and kind
    member = good[run.group] & layout.step_ok(run.rows)
    rows_in = np.flatnonzero(member)
    where = run.first + rows_in
    out.source[where] = rep_slot[run.group[rows_in]]
    out.walls[where] = _strided(buf, run.base + 1, run.size, run.count, "<f8")[rows_in]
    out.steps[where] = layout.steps(run.rows)[rows_in]
    with np.errstate(invalid="ignore"):  # a signalling NaN is quieted, as struct.unpack does
        values = _strided(buf, run.base + layout.value_at, run.size, run.count, "<f4")
        out.values[where] = values[rows_in].astype(np.float64)


def _strided(buf: U8, offset: int, size: int, count: int, dtype: str) -> np.ndarray:
    """The `dtype` value at `offset` in each of `count` records of `size` bytes, no copy."""
    return np.ndarray((count,), dtype=dtype, buffer=buf, offset=offset, strides=(size + 16,))


def _varying_columns(buf: U8, base: int, size: int, count: int) -> I64:
    """The byte columns that differ between the records of a run, compared 8 bytes at a time
    (the last word overlaps the one before it when the size is not a multiple of 8)."""
    offsets = [*range(0, size - 7, 8), size - 8]
    differs = []
    for off in offsets:
        words = _strided(buf, base + off, size, count, "<u8")
        differs.append(int(np.bitwise_or.reduce(words ^ words[0])))
    varying = {
        off + byte for off, bits in zip(offsets, differs, strict=True) if bits
        for byte in range(8) if (bits >> (8 * byte)) & 0xFF
    }
    return np.array(sorted(varying), dtype=np.int64)


def _groups(key: npt.NDArray[np.uint64]) -> tuple[I64, I64]:
    """(first row of each distinct key, which group each row is in), in O(rows) when the keys
    are small (a byte or two of tag), else by sorting."""
    if len(key) and int(key.max()) < _SMALL_KEYS:
        small = key.astype(np.int64)
        first = np.full(_SMALL_KEYS, -1, dtype=np.int64)
        backwards = np.arange(len(small) - 1, -1, -1, dtype=np.int64)
        first[small[backwards]] = backwards  # the last write wins: each key's first row
        used = np.flatnonzero(first >= 0)
        group_of = np.zeros(_SMALL_KEYS, dtype=np.int64)
        group_of[used] = np.arange(len(used))
        return first[used], group_of[small]
    _, reps, inverse = np.unique(key, return_index=True, return_inverse=True)
    return reps.astype(np.int64), inverse.ravel().astype(np.int64)


def _pack(rows: np.ndarray, cols: I64) -> npt.NDArray[np.uint64]:
    key = np.zeros(len(rows), dtype=np.uint64)
    for k, col in enumerate(cols.tolist()):
        key |= rows[:, col].astype(np.uint64) << np.uint64(8 * k)
    return key


@dataclass(frozen=True)
class _Layout:
    """Where the parts of a scalar event of one shape are: the bytes that may differ between
    events of one tag (wall time, step varint, value) and nothing else."""

    step_width: int  # 0: no step field
    value_at: int
    tensor: bool  # a float32 tensor (else simple_value)
    tail: bool  # the scalars metadata follows the tensor

    def free_columns(self, size: int) -> Bools:
        free = np.zeros(size, dtype=bool)
        free[1:9] = True
        free[10 : 10 + self.step_width] = True
        free[self.value_at : self.value_at + 4] = True
        return free

    def step_ok(self, rows: np.ndarray) -> Bools:
        """The step varint keeps its width: continuation bits on all bytes but the last."""
        ok = np.ones(len(rows), dtype=bool)
        for j in range(self.step_width):
            more = rows[:, 10 + j] >= 0x80
            ok &= more if j < self.step_width - 1 else ~more
        return ok

    def steps(self, rows: np.ndarray) -> I64:
        value = np.zeros(len(rows), dtype=np.uint64)
        for j in range(self.step_width):
            byte = rows[:, 10 + j].astype(np.uint64) & np.uint64(0x7F)
            value |= byte << np.uint64(7 * j)
        return value.view(np.int64)


def _layout(buf: U8, start: int, size: int) -> _Layout | None:
    """The layout of the scalar event at `start`, if it is simple_value or a float32 tensor
    (the field-by-field path then checks the rest of its shape)."""
    data = bytes(buf[start : start + size])
    if size < 16 or data[0] != s.K_WALL:
        return None
    width = 0
    if data[9] == s.K_STEP:
        while width < 10 and 10 + width < size and data[10 + width] >= 0x80:
            width += 1
        width += 1
        if width > 10:
            return None
    tail = len(_MD_FIELD) if data.endswith(_MD_FIELD) else 0
    value_at = size - tail - 4
    if value_at - len(_F32) < 10 + width:
        return None
    if data[value_at - len(_F32) : value_at] == _F32:
        return _Layout(width, value_at, tensor=True, tail=tail > 0)
    if tail == 0 and data[value_at - 1] == s.K_SIMPLE:
        return _Layout(width, value_at, tensor=False, tail=False)
    return None


class _Columns:
    """Per-record columns; `source` is the position in the field-by-field result whose tag and
    kind a record shares (its own, or its group representative's)."""

    def __init__(self, n: int) -> None:
        self.source = np.full(n, -1, dtype=np.int64)
        self.steps = np.zeros(n, dtype=np.int64)
        self.walls = np.zeros(n, dtype=np.float64)
        self.values = np.zeros(n, dtype=np.float64)
        self.extra: list[tuple[I64, I64, FastScalars]] = []

    def take(self, where: I64, pos: I64, decoded: FastScalars) -> None:
        """Records decoded field by field: `decoded` holds them at `pos`."""
        self.steps[where] = decoded.steps[pos]
        self.walls[where] = decoded.wall_times[pos]
        self.values[where] = decoded.values[pos]
        self.extra.append((where, pos, decoded))

    def result(self, checked: FastScalars) -> FastScalars:
        n = len(self.source)
        names = {t: i for i, t in enumerate(checked.tags)}
        tag = np.full(n, -1, dtype=np.int64)
        is_tensor = np.zeros(n, dtype=bool)
        has_md = np.zeros(n, dtype=bool)
        grouped = np.flatnonzero(self.source >= 0)
        src = self.source[grouped]
        tag[grouped] = checked.tag_ids[src]
        is_tensor[grouped], has_md[grouped] = checked.is_tensor[src], checked.has_metadata[src]
        for where, pos, decoded in self.extra:
            # One id per name across the decodes (the timeline compares ids).
            remap = np.array([names.setdefault(t, len(names)) for t in decoded.tags], np.int64)
            tag[where] = remap[decoded.tag_ids[pos]] if len(remap) else -1
            is_tensor[where], has_md[where] = decoded.is_tensor[pos], decoded.has_metadata[pos]
        index = np.flatnonzero(tag >= 0)
        return FastScalars(
            index, tag[index], list(names), self.steps[index], self.walls[index],
            self.values[index], is_tensor[index], has_md[index],
        )
