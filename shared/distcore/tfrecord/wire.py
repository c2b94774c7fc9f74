"""A minimal protobuf wire walker: enough to find fields by number and skip the rest unparsed.

It refuses what protobuf's parsers refuse, so a record either decodes as TensorBoard's loader
would or is rejected as a whole (never half-read into a point with a default step):
field number 0 or a key past 32 bits, wire types 6 and 7, unbalanced groups, truncations, and
(when the caller says which fields it knows) a known field in a wire type its type never takes,
as prost, the Rust data server's decoder, does. Unknown fields of any valid wire type, groups
included, are skipped.

Below the walker: the event protos' field numbers and wire keys, taken from TensorBoard's shipped
descriptors (the kernel and the walker look at raw bytes; nothing of the schema is written by
hand).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Final

from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
from tensorboard.plugins.hparams import plugin_data_pb2

WIRE_VARINT: Final = 0
WIRE_FIXED64: Final = 1
WIRE_LEN: Final = 2
WIRE_START_GROUP: Final = 3
WIRE_END_GROUP: Final = 4
WIRE_FIXED32: Final = 5

_F64: Final = struct.Struct("<d")
_F32: Final = struct.Struct("<f")
_MAX_KEY: Final = (1 << 32) - 1
_MAX_DEPTH: Final = 100  # protobuf's default recursion limit

Expected = Mapping[int, frozenset[int]]  # field number -> the wire types it may take


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise WireError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _key(data: bytes, pos: int) -> tuple[int, int, int]:
    key, pos = read_varint(data, pos)
    number, wire_type = key >> 3, key & 7
    if number == 0 or key > _MAX_KEY:
        raise WireError(f"invalid field number {number}")
    return number, wire_type, pos


def _skip_group(data: bytes, pos: int, number: int, depth: int = 0) -> int:
    """The position after the END_GROUP key that closes the group `number` opened before `pos`."""
    if depth > _MAX_DEPTH:
        raise WireError("groups nested too deeply")
    while True:
        if pos >= len(data):
            raise WireError("unterminated group")
        inner, wire_type, pos = _key(data, pos)
        if wire_type == WIRE_END_GROUP:
            if inner != number:
                raise WireError("mismatched end of group")
            return pos
        pos = _skip_value(data, pos, inner, wire_type, depth + 1)[1]


def _skip_value(data: bytes, pos: int, number: int, wire_type: int, depth: int) -> tuple[int, int]:
    """(where the value starts, where it ends); a varint's start is the varint itself."""
    if wire_type == WIRE_VARINT:
        return pos, read_varint(data, pos)[1]
    if wire_type == WIRE_LEN:
        size, pos = read_varint(data, pos)
    elif wire_type in (WIRE_FIXED64, WIRE_FIXED32):
        size = 8 if wire_type == WIRE_FIXED64 else 4
    elif wire_type == WIRE_START_GROUP:
        return pos, _skip_group(data, pos, number, depth)
    else:
        raise WireError(f"invalid wire type {wire_type}")
    if pos + size > len(data):
        raise WireError("field runs past the end of the message")
    return pos, pos + size


Field = tuple[int, int, int | bytes]


def fields(data: bytes, expected: Expected | None = None) -> Iterator[Field]:
    """(field number, wire type, value): ints for varints, raw bytes for everything else (a
    group's bytes run to its END_GROUP key). A field of `expected` in another wire type is an
    error (the fields before it are yielded all the same)."""
    pos, end = 0, len(data)
    while pos < end:
        number, wire_type, pos = _key(data, pos)
        if expected is not None and wire_type not in expected.get(number, _ANY):
            raise WireError(f"field {number} in wire type {wire_type}")
        if wire_type == WIRE_VARINT:
            value, pos = read_varint(data, pos)
            yield number, wire_type, value
            continue
        start, pos = _skip_value(data, pos, number, wire_type, 0)
        yield number, wire_type, data[start:pos]


_ANY: Final = frozenset((WIRE_VARINT, WIRE_FIXED64, WIRE_LEN, WIRE_START_GROUP, WIRE_FIXED32))
_NATIVE: Final[dict[int, int]] = {
    **dict.fromkeys(
        (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64),
        WIRE_FIXED64,
    ),
    **dict.fromkeys(
        (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_SFIXED32),
        WIRE_FIXED32,
    ),
    **dict.fromkeys(
        (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_MESSAGE),
        WIRE_LEN,
    ),
    FieldDescriptor.TYPE_GROUP: WIRE_START_GROUP,
}


def expected_wire_types(message: Descriptor) -> Expected:
    """Each field of `message` and the wire types it may arrive in: its own, and WIRE_LEN as well
    for a repeated number (packed or not, parsers take both)."""
    return _expected(message.full_name, message)


@cache
def _expected(_name: str, message: Descriptor) -> Expected:
    out = {}
    for f in message.fields:
        native = _NATIVE.get(f.type, WIRE_VARINT)
        # protobuf 5+ has is_repeated (label is deprecated); older ones only label.
        repeated = getattr(f, "is_repeated", None)
        if repeated is None:
            repeated = getattr(f, "label", None) == FieldDescriptor.LABEL_REPEATED
        packable = bool(repeated) and native != WIRE_LEN
        out[f.number] = frozenset((native, WIRE_LEN) if packable else (native,))
    return out


def validate(data: bytes, message: Descriptor, depth: int = 0) -> None:
    """Raise WireError unless `data` is well formed as `message`, nested messages included:
    done before handing bytes to protobuf, which would keep a mistyped field as unknown."""
    _check(data, _plan(message), depth)


@dataclass(frozen=True, eq=False)
class _Plan:
    """What validate needs of a message: its fields' wire types, and the plan of each field
    that holds a message. Read from the descriptor once: looking it up per call (its fields
    by number, each one's message type) was most of an hparams record's validation."""

    expected: Expected
    inner: dict[int, _Plan]


_PLANS: dict[Descriptor, _Plan] = {}


def _plan(message: Descriptor) -> _Plan:
    plan = _PLANS.get(message)
    if plan is None:
        plan = _PLANS[message] = _Plan(expected_wire_types(message), {})
        for f in message.fields:  # (after it is stored: messages may hold themselves)
            if f.message_type is not None:
                plan.inner[f.number] = _plan(f.message_type)
    return plan


def _check(data: bytes, plan: _Plan, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise WireError("messages nested too deeply")
    inner = plan.inner
    for number, wire_type, raw in fields(data, plan.expected):
        if wire_type == WIRE_LEN:
            sub = inner.get(number)
            if sub is not None:
                _check(as_bytes(raw), sub, depth + 1)


def as_double(raw: int | bytes) -> float:
    if not isinstance(raw, bytes) or len(raw) != 8:
        raise WireError("expected a fixed64")
    return float(_F64.unpack(raw)[0])


def as_float(raw: int | bytes) -> float:
    if not isinstance(raw, bytes) or len(raw) != 4:
        raise WireError("expected a fixed32")
    return float(_F32.unpack(raw)[0])


def as_int64(raw: int | bytes) -> int:
    if isinstance(raw, bytes):
        raise WireError("expected a varint")
    raw &= (1 << 64) - 1  # a 10-byte varint may carry bits past 64: protobuf drops them
    return raw - (1 << 64) if raw >= 1 << 63 else raw


def as_bytes(raw: int | bytes) -> bytes:
    if not isinstance(raw, bytes):
        raise WireError("expected a length-delimited field")
    return raw


def number(message: Descriptor, field: str) -> int:
    return int(message.fields_by_name[field].number)


def key(message: Descriptor, field: str, wire_type: int) -> int:
    """The one-byte (for fields < 16) key that precedes a field on the wire."""
    return (number(message, field) << 3) | wire_type


_EVENT = event_pb2.Event.DESCRIPTOR
_SUMMARY = summary_pb2.Summary.DESCRIPTOR
_VALUE = summary_pb2.Summary.Value.DESCRIPTOR

EVENT_WALL_TIME: Final = number(_EVENT, "wall_time")
EVENT_STEP: Final = number(_EVENT, "step")
EVENT_SUMMARY: Final = number(_EVENT, "summary")
EVENT_SESSION_LOG: Final = number(_EVENT, "session_log")
SUMMARY_VALUE: Final = number(_SUMMARY, "value")
VALUE_TAG: Final = number(_VALUE, "tag")
VALUE_SIMPLE: Final = number(_VALUE, "simple_value")
VALUE_METADATA: Final = number(_VALUE, "metadata")
VALUE_TENSOR: Final = number(_VALUE, "tensor")
# The hparams plugin's session start: map<string, google.protobuf.Value> hparams.
_HP = plugin_data_pb2.HParamsPluginData.DESCRIPTOR
_START = plugin_data_pb2.SessionStartInfo.DESCRIPTOR
_STRUCT_VALUE = struct_pb2.Value.DESCRIPTOR
HPARAMS_SESSION_START: Final = number(_HP, "session_start_info")
SESSION_START_HPARAMS: Final = number(_START, "hparams")
_MAP_ENTRY = _START.fields_by_name["hparams"].message_type
MAP_KEY: Final = number(_MAP_ENTRY, "key")
MAP_VALUE: Final = number(_MAP_ENTRY, "value")
VALUE_NUMBER: Final = number(_STRUCT_VALUE, "number_value")
VALUE_STRING: Final = number(_STRUCT_VALUE, "string_value")
VALUE_BOOL: Final = number(_STRUCT_VALUE, "bool_value")
# Payloads skipped without being parsed.
VALUE_SKIPPED: Final = frozenset(
    number(_VALUE, f) for f in ("obsolete_old_style_histogram", "image", "histo", "audio")
)

# One-byte keys for the kernel (batch.py passes them).
K_WALL: Final = key(_EVENT, "wall_time", WIRE_FIXED64)
K_STEP: Final = key(_EVENT, "step", WIRE_VARINT)
K_SUMMARY: Final = key(_EVENT, "summary", WIRE_LEN)
K_VALUE: Final = key(_SUMMARY, "value", WIRE_LEN)
K_TAG: Final = key(_VALUE, "tag", WIRE_LEN)
K_SIMPLE: Final = key(_VALUE, "simple_value", WIRE_FIXED32)
K_TENSOR: Final = key(_VALUE, "tensor", WIRE_LEN)
K_METADATA: Final = key(_VALUE, "metadata", WIRE_LEN)

_PLUGIN_DATA = summary_pb2.SummaryMetadata.PluginData.DESCRIPTOR
# The keys of the hparams plugin's usual record, in the order the kernel's hparams_event takes
# them: event, summary, value, its metadata and plugin data, the session start and its values.
HPARAMS_RECORD_KEYS: Final = (
    K_WALL, K_STEP, K_SUMMARY, K_VALUE, K_TAG, K_TENSOR, K_METADATA,
    key(summary_pb2.SummaryMetadata.DESCRIPTOR, "plugin_data", WIRE_LEN),
    key(_PLUGIN_DATA, "plugin_name", WIRE_LEN), key(_PLUGIN_DATA, "content", WIRE_LEN),
    key(_HP, "version", WIRE_VARINT), key(_HP, "session_start_info", WIRE_LEN),
    key(_START, "hparams", WIRE_LEN), key(_MAP_ENTRY, "key", WIRE_LEN),
    key(_MAP_ENTRY, "value", WIRE_LEN), key(_STRUCT_VALUE, "number_value", WIRE_FIXED64),
    key(_STRUCT_VALUE, "string_value", WIRE_LEN), key(_STRUCT_VALUE, "bool_value", WIRE_VARINT),
)  # fmt: skip


def _scalar_tensor_prefix(dtype: int, width: int) -> bytes:
    """How TF serialises a 0-d float tensor up to its content bytes: dtype, empty shape, content."""
    proto = tensor_pb2.TensorProto(dtype=dtype, tensor_content=b"\0" * width)
    proto.tensor_shape.SetInParent()
    wire = proto.SerializeToString()
    return wire[: len(wire) - width]


F32_TENSOR_PREFIX: Final = _scalar_tensor_prefix(types_pb2.DT_FLOAT, 4)
F64_TENSOR_PREFIX: Final = _scalar_tensor_prefix(types_pb2.DT_DOUBLE, 8)

SCALARS_PLUGIN: Final = "scalars"
HPARAMS_PLUGIN: Final = "hparams"
# The metadata tf.summary.scalar attaches (plugin "scalars", nothing else).
SCALARS_METADATA: Final = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=SCALARS_PLUGIN)
).SerializeToString()
SESSION_START: Final = int(event_pb2.SessionLog.START)
