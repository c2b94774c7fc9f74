"""One pass over a profile's events, keeping what the analyses need: step markers, the
consumer's get-next spans, tf.data iterator events, TensorFlow ops with their self time, and
device kernels and copies per stream.

The names TensorFlow gives (the format's facts, as TF and Keras write them):
- a host op event is `op_name:OpType`; collective ops (`CollectiveReduceV2`, NCCL's) are
  communication, and run on their own `collective_ops` threads, off the `tf_Compute` lines;
- a step marker is any host event with a `step_num` stat: Keras 3 `model.fit` writes
  `Profiled batch` without the `_r` stat, `tf.profiler.experimental.Trace(step_num=..., _r=1)`
  writes it with;
- the consumer waits for input in `IteratorGetNextOp::DoCompute` (or the AsOptional and Sync
  kernels); tf.data iterators are `Iterator::Root::...::Stage` events with `id` and
  `parent_id` stats;
- tf.data's own threads (`tf_data_*` lines) run the pipeline's functions, whose ops are input
  work, not the model's compute.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from distcore.profile.decode import GPU_PLANE_PREFIX, HOST_PLANE, Line, Plane, StatValue, clamp
from distcore.profile.intervals import Interval

_OP: Final = re.compile(r"[A-Za-z0-9._][A-Za-z0-9_.\-/>]*:([A-Za-z_][A-Za-z0-9_]*)")
_GET_NEXT: Final = re.compile(r"Iterator(GetNext|GetNextAsOptional|GetNextSync)Op::DoCompute")
_COLLECTIVE_TYPES: Final = re.compile(r"Collective|Nccl|AllReduce|AllGather|ReduceScatter|AllToAll")
_DEVICE_COMMUNICATION: Final = re.compile(r"nccl|AllReduce|AllGather|ReduceScatter", re.I)
_COPY: Final = ("Memcpy", "Memset")
ITERATOR_PREFIX: Final = "Iterator::"


@dataclass
class IteratorEvent:
    path: str  # Iterator::Root::...::Stage
    start: int
    end: int
    key: str  # the iterator's id, or its path where the id is missing
    parent: str
    stats: dict[str, StatValue]


@dataclass
class OpTotal:
    count: int = 0
    self_ps: int = 0


@dataclass
class StreamTotal:
    kernels: int = 0
    kernel_ps: int = 0
    copies: int = 0
    copy_ps: int = 0


@dataclass
class Collected:
    markers: dict[int, Interval] = field(default_factory=dict)  # step number -> longest marker
    get_next: list[Interval] = field(default_factory=list)
    communication: list[Interval] = field(default_factory=list)
    host_compute: list[Interval] = field(default_factory=list)
    device_compute: list[Interval] = field(default_factory=list)
    iterators: list[IteratorEvent] = field(default_factory=list)
    # (where, kind, name) -> totals; where: host or the device plane; kind: compute/communication
    ops: dict[tuple[str, str, str], OpTotal] = field(default_factory=dict)
    streams: dict[tuple[str, str], StreamTotal] = field(default_factory=dict)
    events: int = 0


def collect(planes: list[Plane], max_step: int) -> Collected:
    out = Collected()
    for plane in planes:
        if plane.name == HOST_PLANE:
            kinds = _op_kinds(plane)
            for line in plane.lines():
                _host_line(plane, kinds, line, out, max_step)
        elif plane.name.startswith(GPU_PLANE_PREFIX):
            for line in plane.lines():
                _device_line(plane, line, out)
    return out


# An op event's type, and whether it is communication; None for events that are no op.
OpKind = tuple[str, bool] | None


def _op_kinds(plane: Plane) -> dict[int, OpKind]:
    kinds: dict[int, OpKind] = {}
    for key, name in plane.event_names.items():
        match = _OP.fullmatch(name)
        op_type = match.group(1) if match else None
        kinds[key] = None if op_type is None else (
            op_type, bool(_COLLECTIVE_TYPES.search(op_type)))
    return kinds


def _host_line(
    plane: Plane, kinds: dict[int, OpKind], line: Line, out: Collected, max_step: int
) -> None:
    step_id = plane.stat_id("step_num")
    pipeline = line.name.startswith("tf_data_")
    names = plane.event_names
    ops: list[tuple[int, int, str, bool]] = []
    for start, end, event in line.spans():
        out.events += 1
        op = kinds.get(event.metadata_id)
        if op is not None:
            if not pipeline:
                ops.append((start, end, *op))
            continue
        name = names.get(event.metadata_id, "")
        if name.startswith(ITERATOR_PREFIX):
            out.iterators.append(_iterator(plane, name, start, end, event))
        elif _GET_NEXT.fullmatch(name):
            out.get_next.append((start, end))
        elif step_id is not None and any(s.metadata_id == step_id for s in event.stats):
            _marker(plane, event, start, end, out, max_step)
    _op_self_times(ops, out)


def _marker(plane: Plane, event: Any, start: int, end: int, out: Collected, max_step: int) -> None:
    value = plane.stats(event).get("step_num")
    if not isinstance(value, int):
        return
    number = clamp(value, 0, max_step)
    known = out.markers.get(number)
    if known is None or end - start > known[1] - known[0]:
        out.markers[number] = (start, end)


def _iterator(plane: Plane, path: str, start: int, end: int, event: Any) -> IteratorEvent:
    stats = plane.stats(event)
    key = str(stats["id"]) if "id" in stats else path
    parent = str(stats["parent_id"]) if "parent_id" in stats else path.rpartition("::")[0]
    return IteratorEvent(path, start, end, key, parent, stats)


def _op_self_times(ops: list[tuple[int, int, str, bool]], out: Collected) -> None:
    """Self time of each op on one thread: its span less the ops nested in it (a function
    call op holds the ops it runs)."""
    ops.sort(key=lambda op: (op[0], -op[1]))
    stack: list[list[Any]] = []  # [end, type, communicates, start, time of nested ops]
    closed: list[list[Any]] = []
    for start, end, op_type, communicates in ops:
        while stack and stack[-1][0] <= start:
            closed.append(stack.pop())
        if stack:
            stack[-1][4] += min(end, stack[-1][0]) - start
        stack.append([end, op_type, communicates, start, 0])
    closed.extend(stack)
    totals = out.ops
    for end, op_type, communicates, start, nested in closed:
        key = ("host", "communication" if communicates else "compute", op_type)
        total = totals.get(key)
        if total is None:
            total = totals[key] = OpTotal()
        total.count += 1
        total.self_ps += max(end - start - nested, 0)
        (out.communication if communicates else out.host_compute).append((start, end))


def _device_line(plane: Plane, line: Line, out: Collected) -> None:
    """A GPU stream (`Stream #N(...)`): kernels and copies, each its own time on the device."""
    if not line.name.startswith("Stream"):
        return  # lines derived from the streams (steps, XLA modules, ops) would count twice
    stream = out.streams.setdefault((plane.name, line.name), StreamTotal())
    for start, end, event in line.spans():
        out.events += 1
        name = plane.event_names.get(event.metadata_id, "")
        if name.startswith(_COPY):
            stream.copies += 1
            stream.copy_ps += end - start
            continue
        stream.kernels += 1
        stream.kernel_ps += end - start
        communicates = bool(_DEVICE_COMMUNICATION.search(name))
        kind = "communication" if communicates else "compute"
        total = out.ops.setdefault((plane.name, kind, name), OpTotal())
        total.count += 1
        total.self_ps += end - start
        (out.communication if communicates else out.device_compute).append((start, end))
