"""Event records built byte by byte, so tests control what protobuf's API would not let them:
tags that are not UTF-8, varints of any width (padded encodings parse like minimal ones), field
order, and records that only look like events. Also hypothesis strategies over such records."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import strategies as st
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
from tensorboard.plugins.hparams import plugin_data_pb2

import distcore.tfrecord.wire as s
from tests.kit.writers import header, record, varint


def field(key: int, payload: bytes, width: int | None = None) -> bytes:
    return bytes([key]) + varint(len(payload), width) + payload


def tensor(kind: str, value: float) -> bytes:
    """A 0-d tensor: f32/f64 as TF2 writes them, i64, or f32 of shape [1] (not a plain scalar)."""
    if kind == "f32":
        return s.F32_TENSOR_PREFIX + struct.pack("<f", value)
    if kind == "f64":
        return s.F64_TENSOR_PREFIX + struct.pack("<d", value)
    proto = tensor_pb2.TensorProto()
    if kind == "i64":
        proto.dtype = types_pb2.DT_INT64
        number = int(max(-(2.0**62), min(2.0**62, value))) if np.isfinite(value) else 0
        proto.int64_val.append(number)
        proto.tensor_shape.SetInParent()
    else:
        proto.dtype = types_pb2.DT_FLOAT
        proto.tensor_shape.dim.add(size=1)
        proto.float_val.append(value)
    return proto.SerializeToString()


_HISTO = s.number(summary_pb2.Summary.Value.DESCRIPTOR, "histo")
OTHER_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="histograms")
).SerializeToString()


def hparams_metadata(names: list[str]) -> bytes:
    data = plugin_data_pb2.HParamsPluginData(version=0)
    for i, name in enumerate(names):
        data.session_start_info.hparams[name].number_value = float(i)
    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name=s.HPARAMS_PLUGIN, content=data.SerializeToString()
        )
    ).SerializeToString()


def value(tag: bytes, kind: str, number: float, widths: tuple[int, int]) -> bytes:
    """One Summary.Value: tag, then the payload `kind` names."""
    out = field(s.K_TAG, tag, widths[0])
    if kind == "simple":
        return out + bytes([s.K_SIMPLE]) + struct.pack("<f", number)
    if kind == "histogram":
        return out + field((_HISTO << 3) | 2, b"\x09" + bytes(8))
    if kind == "hparams":
        return out + field(s.K_METADATA, hparams_metadata(["lr", "layers"]))
    base, _, md = kind.partition("+")
    out += field(s.K_TENSOR, tensor(base, number), widths[1])
    if md == "md":
        out += field(s.K_METADATA, s.SCALARS_METADATA)
    elif md == "other":
        out += field(s.K_METADATA, OTHER_METADATA)
    return out


KINDS = [
    "simple", "f32", "f32+md", "f64+md", "f64", "i64+md", "shaped+md", "f32+other",
    "histogram", "hparams",
]


@st.composite
def events(draw: st.DrawFn, tags: list[bytes]) -> bytes:
    """One serialised Event, usually shaped like a writer's, sometimes not."""
    wall = draw(st.sampled_from([1.7e9, 0.0, float("nan"), float("inf"), -float("inf"), 1e300])
                | st.floats(width=64))
    step = draw(st.sampled_from([0, 1, -1, 2**63 - 1, -(2**63), 127, 128, 2**35])
                | st.integers(-(2**63), 2**63 - 1))
    width = draw(st.integers(1, 10))
    step_field = bytes([s.K_STEP]) + varint(step, width) if step or draw(st.booleans()) else b""
    wall_field = bytes([s.K_WALL]) + struct.pack("<d", wall) if wall or draw(st.booleans()) else b""
    shape = draw(st.sampled_from(["scalars", "scalars", "scalars", "restart", "version", "two"]))
    if shape == "restart":
        log = event_pb2.SessionLog(status=event_pb2.SessionLog.START).SerializeToString()
        return wall_field + step_field + field((s.EVENT_SESSION_LOG << 3) | 2, log)
    if shape == "version":
        return wall_field + field((3 << 3) | 2, b"brain.Event:2")
    count = 2 if shape == "two" else 1
    summary = b""
    for _ in range(count):
        tag = draw(st.sampled_from(tags))
        kind = draw(st.sampled_from(KINDS))
        number = draw(st.floats(width=32))
        widths = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        summary += field(s.K_VALUE, value(tag, kind, number, widths), draw(st.integers(1, 3)))
    body = field(s.K_SUMMARY, summary, draw(st.integers(1, 3)))
    if draw(st.integers(0, 9)) == 0:  # fields out of the usual order
        return body + step_field + wall_field
    return wall_field + step_field + body


NAMES = st.binary(min_size=0, max_size=130) | st.sampled_from(
    [b"loss", b"metric/0", b"\xff", b"\xfe", b"a\xffb", b"a\xfeb", b"x" * 96, b"y" * 97,
     b"\x1b[31mred", "ü/ß".encode()]
)


@st.composite
def event_file(draw: st.DrawFn) -> bytes:
    """A file's bytes: framed events, maybe damaged (flipped bytes, cuts, garbage, zeros)."""
    tags = draw(st.lists(NAMES, min_size=1, max_size=6))
    data = bytearray(b"".join(record(e) for e in draw(st.lists(events(tags), max_size=40))))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))):
        damage = draw(st.sampled_from(["flip", "cut", "garbage", "zeros", "huge"]))
        at = draw(st.integers(0, len(data)))
        if damage == "flip" and data:
            data[min(at, len(data) - 1)] ^= 1 << draw(st.integers(0, 7))
        elif damage == "cut":
            del data[at : at + draw(st.integers(1, 40))]
        elif damage == "garbage":
            data[at:at] = draw(st.binary(min_size=1, max_size=40))
        elif damage == "zeros":
            data[at:at] = bytes(draw(st.integers(1, 200)))
        else:  # a valid header claiming a record far beyond the file
            data[at:at] = header(draw(st.sampled_from([1 << 20, 1 << 28, 1 << 40])))
    return bytes(data)


RUN_KINDS = ["simple", "f32", "f32+md", "f64+md", "f32+other", "i64+md"]


@st.composite
def run_file(draw: st.DrawFn) -> bytes:
    """A writer's long stretches: a few tags in turn for many steps (crossing varint widths),
    each of one kind, with odd records and damage mixed in: what group decoding works on."""
    tags = draw(st.lists(NAMES, min_size=1, max_size=4))
    kinds = [draw(st.sampled_from(RUN_KINDS)) for _ in tags]
    first = draw(st.sampled_from([0, 100, 16_000, 2**21 - 40, 2**63 - 200, -(2**63), -50])
                 | st.integers(-(2**63), 2**63 - 300))
    count = draw(st.integers(20, 120))
    wall = draw(st.sampled_from([1.7e9, float("nan"), 0.0]))
    out = []
    for step in range(first, first + count):
        for tag, kind in zip(tags, kinds, strict=True):
            number = float(np.float32(np.sin(step % 1000)))
            summary = field(s.K_VALUE, value(tag, kind, number, (1, 1)))
            step_field = bytes([s.K_STEP]) + varint(step) if step else b""
            wall_field = bytes([s.K_WALL]) + struct.pack("<d", wall + (step % 7))
            out.append(record(wall_field + step_field + field(s.K_SUMMARY, summary)))
    for _ in range(draw(st.integers(0, 3))):  # odd records in between
        out.insert(draw(st.integers(0, len(out))), record(draw(events(tags))))
    data = bytearray(b"".join(out))
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        data[draw(st.integers(0, len(data) - 1))] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)
