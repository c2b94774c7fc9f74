"""Field numbers and wire keys of the event protos, taken from TensorBoard's shipped descriptors.

The fast path and the wire walker look at raw bytes; they get every field number from the
descriptors here, so nothing about the schema is written down by hand.
"""

from __future__ import annotations

from typing import Final

from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
from tensorboard.plugins.hparams import plugin_data_pb2

# Protobuf wire types.
WIRE_VARINT: Final = 0
WIRE_FIXED64: Final = 1
WIRE_LEN: Final = 2
WIRE_START_GROUP: Final = 3
WIRE_END_GROUP: Final = 4
WIRE_FIXED32: Final = 5


def number(message: Descriptor, field: str) -> int:
    return int(message.fields_by_name[field].number)


def key(message: Descriptor, field: str, wire_type: int) -> int:
    """The one-byte (for fields < 16) key that precedes a field on the wire."""
    return (number(message, field) << 3) | wire_type


_EVENT = event_pb2.Event.DESCRIPTOR
_SUMMARY = summary_pb2.Summary.DESCRIPTOR
_VALUE = summary_pb2.Summary.Value.DESCRIPTOR
_TENSOR = tensor_pb2.TensorProto.DESCRIPTOR

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

# One-byte keys for the vectorised fast path.
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
