"""collect.py's pass over the events, on the bulk decoder's arrays: the same step markers,
iterator events, op totals and stream totals, with the time spans the steps are split by kept
as arrays (`Spans`) rather than lists of tuples. Events are sorted into kinds by their
metadata id, a plane's names matched once; only step markers and tf.data iterator events,
whose stats are read, become messages."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

from distcore.profile import collect as reference
from distcore.profile.bulk import PlaneEvents
from distcore.profile.collect import Collected, OpTotal, StreamTotal
from distcore.profile.decode import GPU_PLANE_PREFIX, HOST_PLANE
from distcore.profile.wire import Array

_ITERATOR: Final = -1
_GET_NEXT: Final = -2
_OTHER: Final = -3
_SPLIT: Final = 21  # bits of a part of the values exact_sums adds


@dataclass
class Spans:
    """Each kind of time as (starts, ends) arrays, in no particular order."""

    get_next: list[tuple[Array, Array]] = field(default_factory=list)
    communication: list[tuple[Array, Array]] = field(default_factory=list)
    host_compute: list[tuple[Array, Array]] = field(default_factory=list)
    device_compute: list[tuple[Array, Array]] = field(default_factory=list)


def collect(planes: list[PlaneEvents], max_step: int) -> tuple[Collected, Spans]:
    out, spans = Collected(), Spans()
    for plane in planes:
        if plane.name == HOST_PLANE:
            _host_plane(plane, out, spans, max_step)
        elif plane.name.startswith(GPU_PLANE_PREFIX):
            _device_plane(plane, out, spans)
    return out, spans


def exact_sums(values: Array, groups: Array, count: int) -> list[int]:
    """The sum of `values` (each in [0, 2**63)) in each of `count` groups, as Python ints:
    bincount adds in floating point, exact while a sum stays under 2**53, so the values are
    added as three 21-bit parts."""
    total = [0] * count
    for shift in (0, _SPLIT, 2 * _SPLIT):
        part = (values >> shift) & ((1 << _SPLIT) - 1)
        sums = np.bincount(groups, weights=part, minlength=count).astype(np.int64).tolist()
        total = [t + (s << shift) for t, s in zip(total, sums, strict=True)]
    return total


def _lookup(keys: Array, codes: Array, ids: Array, missing: int) -> Array:
    """codes[...] of each id in the sorted `keys`; `missing` for ids not there."""
    if not keys.size:
        return np.full(len(ids), missing, np.int64)
    at = np.clip(np.searchsorted(keys, ids), 0, len(keys) - 1)
    return np.where(keys[at] == ids, codes[at], missing)


def _host_plane(plane: PlaneEvents, out: Collected, spans: Spans, max_step: int) -> None:
    kinds = reference._op_kinds(plane.plane)
    names = plane.plane.event_names
    op_types = sorted({kind for kind in kinds.values() if kind is not None})
    op_code = {kind: code for code, kind in enumerate(op_types)}
    keys = np.array(sorted(names), np.int64)
    codes = np.array([_host_code(names[key], kinds[key], op_code) for key in keys.tolist()],
                     np.int64)
    communicates = np.array([talk for _, talk in op_types], np.bool_)
    step_id = plane.plane.stat_id("step_num")
    markers = plane.with_stat(step_id) if step_id is not None else None
    computes = np.array([not line.name.startswith("tf_data_") for line in plane.lines],
                        np.bool_)
    every = np.ones(len(plane.lines), np.bool_)
    parts: list[tuple[Array, Array]] = []
    for group in plane.groups():
        index, line, start, end = plane.spans(every, group)
        out.events += len(index)
        code = _lookup(keys, codes, plane.metadata_id[index], _OTHER)
        ops = (code >= 0) & computes[line]
        parts.append(_op_self_times(start[ops], end[ops], code[ops], line[ops]))
        talk = communicates[code[ops]]
        spans.communication.append((start[ops][talk], end[ops][talk]))
        spans.host_compute.append((start[ops][~talk], end[ops][~talk]))
        get_next = code == _GET_NEXT
        spans.get_next.append((start[get_next], end[get_next]))
        iterators = np.flatnonzero(code == _ITERATOR)
        for i, event in zip(iterators.tolist(), plane.events(index[iterators].tolist()),
                            strict=True):
            path = names[int(plane.metadata_id[index[i]])]
            out.iterators.append(
                reference._iterator(plane.plane, path, int(start[i]), int(end[i]), event))
        if markers is not None:
            found = np.flatnonzero((code == _OTHER) & markers[index])
            for i, event in zip(found.tolist(), plane.events(index[found].tolist()),
                                strict=True):
                reference._marker(plane.plane, event, int(start[i]), int(end[i]), out,
                                  max_step)
    _op_totals(parts, op_types, out)


def _host_code(name: str, kind: reference.OpKind, op_code: dict[tuple[str, bool], int]) -> int:
    if kind is not None:
        return op_code[kind]
    if name.startswith(reference.ITERATOR_PREFIX):
        return _ITERATOR
    if reference._GET_NEXT.fullmatch(name):
        return _GET_NEXT
    return _OTHER


def _op_self_times(
    start: Array, end: Array, code: Array, line: Array
) -> tuple[Array, Array]:
    """collect._op_self_times on arrays, each thread (`line`, in order) on its own: (op
    codes, self times). An op alone in its stretch of time (none open when it starts, none
    starting before it ends) is all self time; the stack is walked in Python only through
    stretches where ops nest."""
    same = line[1:] == line[:-1]
    if (same & (start[1:] <= start[:-1])).any():  # not in time order, one op a start
        order = np.lexsort((-end, start, line))  # stable, as the reference's sort
        start, end, code = start[order], end[order], code[order]
    if not start.size:
        return code, start
    reach = _reach(end, np.flatnonzero(~same) + 1)
    opens_alone = np.ones(len(start), np.bool_)
    opens_alone[1:] = ~same | (start[1:] >= reach[:-1])
    alone = opens_alone.copy()
    alone[:-1] &= opens_alone[1:]
    self_ps = end - start
    nested = np.flatnonzero(~alone)
    self_ps[nested] = _nested_self(start[nested], end[nested], opens_alone[nested])
    return code, self_ps


def _reach(end: Array, firsts: Array) -> Array:
    """The latest end so far of each thread's ops (threads start at `firsts`)."""
    if len(firsts) < 64:
        bounds = [0, *firsts.tolist(), len(end)]
        return np.concatenate([np.maximum.accumulate(end[a:b])
                               for a, b in itertools.pairwise(bounds)])
    # Many threads: rank the ends thread by thread, so that one running maximum over the
    # ranks never carries one thread's end into the next.
    thread = np.zeros(len(end), np.int64)
    thread[firsts] = 1
    by_rank = np.lexsort((end, np.cumsum(thread)))
    rank = np.empty(len(end), np.int64)
    rank[by_rank] = np.arange(len(end))
    reach: Array = end[by_rank][np.maximum.accumulate(rank)]
    return reach


def _op_totals(
    parts: list[tuple[Array, Array]], op_types: list[tuple[str, bool]], out: Collected
) -> None:
    code = np.concatenate([c for c, _ in parts]) if parts else np.zeros(0, np.int64)
    self_ps = np.concatenate([t for _, t in parts]) if parts else np.zeros(0, np.int64)
    counts = np.bincount(code, minlength=len(op_types)).tolist()
    totals = exact_sums(self_ps, code, len(op_types))
    for number in np.flatnonzero(counts).tolist():
        op_type, talk = op_types[number]
        total = out.ops.setdefault(
            ("host", "communication" if talk else "compute", op_type), OpTotal())
        total.count += counts[number]
        total.self_ps += totals[number]


def _nested_self(start: Array, end: Array, opens: npt.NDArray[np.bool_]) -> list[int]:
    """Self time of each op of stretches where ops nest (in the reference's order); a new
    stretch (`opens`) starts with no op open."""
    starts, ends = start.tolist(), end.tolist()
    inside = [0] * len(starts)
    stack: list[int] = []
    for i, (begin, new) in enumerate(zip(starts, opens.tolist(), strict=True)):
        if new:
            stack.clear()
        while stack and ends[stack[-1]] <= begin:
            stack.pop()
        if stack:
            inside[stack[-1]] += min(ends[i], ends[stack[-1]]) - begin
        stack.append(i)
    return [max(e - s - n, 0) for s, e, n in zip(starts, ends, inside, strict=True)]


class _DeviceNames:
    """A device plane's event names, each a code: kernels and copies sorted once a plane."""

    def __init__(self, plane: PlaneEvents) -> None:
        names = plane.plane.event_names
        self.known = sorted(set(names.values()) | {""})
        code_of = {name: code for code, name in enumerate(self.known)}
        self.keys = np.array(sorted(names), np.int64)
        self.codes = np.array([code_of[names[key]] for key in self.keys.tolist()], np.int64)
        self.unknown = code_of[""]
        self.copy = np.array([n.startswith(reference._COPY) for n in self.known], np.bool_)
        self.talks = np.array(
            [bool(reference._DEVICE_COMMUNICATION.search(n)) for n in self.known], np.bool_)


def _device_plane(plane: PlaneEvents, out: Collected, spans: Spans) -> None:
    streams = np.array([line.name.startswith("Stream") for line in plane.lines], np.bool_)
    if not streams.any():
        return  # lines derived from the streams (steps, XLA modules, ops) would count twice
    names = _DeviceNames(plane)
    kernels: list[tuple[Array, Array]] = []
    for group in plane.groups():
        kernels.append(_device_group(plane, names, streams, group, out, spans))
    code = np.concatenate([c for c, _ in kernels])
    counts = np.bincount(code, minlength=len(names.known)).tolist()
    totals = exact_sums(np.concatenate([t for _, t in kernels]), code, len(names.known))
    for number in np.flatnonzero(counts).tolist():
        kind = "communication" if names.talks[number] else "compute"
        total = out.ops.setdefault((plane.name, kind, names.known[number]), OpTotal())
        total.count += counts[number]
        total.self_ps += totals[number]


def _device_group(
    plane: PlaneEvents, names: _DeviceNames, streams: npt.NDArray[np.bool_],
    group: tuple[int, int], out: Collected, spans: Spans,
) -> tuple[Array, Array]:
    """The streams' totals of a group of lines; (name codes, times) of their kernels."""
    index, line, start, end = plane.spans(streams, group)
    out.events += len(index)
    code = _lookup(names.keys, names.codes, plane.metadata_id[index], names.unknown)
    copy = names.copy[code]
    kernel = ~copy
    length = end - start
    first, count = group[0], group[1] - group[0]
    at = line - first
    copies = np.bincount(at[copy], minlength=count).tolist()
    copy_ps = exact_sums(length[copy], at[copy], count)
    kernel_count = np.bincount(at[kernel], minlength=count).tolist()
    kernel_ps = exact_sums(length[kernel], at[kernel], count)
    for number in np.flatnonzero(streams[first:group[1]]).tolist():
        key = (plane.name, plane.lines[first + number].name)
        stream = out.streams.setdefault(key, StreamTotal())
        stream.copies += copies[number]
        stream.copy_ps += copy_ps[number]
        stream.kernels += kernel_count[number]
        stream.kernel_ps += kernel_ps[number]
    talks = names.talks[code] & kernel
    spans.communication.append((start[talks], end[talks]))
    work = kernel & ~talks
    spans.device_compute.append((start[work], end[work]))
    return code[kernel], length[kernel]
