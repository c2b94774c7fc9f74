"""The XSpace message classes this reader needs, built at runtime from a hand-written
descriptor.

Only the fields read here are declared; the field numbers and wire types are the XSpace
format's (tsl/profiler/protobuf/xplane.proto), so anything else a file holds is kept as an
unknown field and never read. Two choices differ from the format's own declaration, both on
the same wire bytes:

- every text field is declared `bytes`: a `string` field that is not UTF-8 fails the whole
  parse, and one bad name must not cost the rest of the file; names are decoded later with
  `surrogateescape`, as the rest of distcore reads outside names;
- the two metadata maps are declared as their repeated entry messages (which is what a map is
  on the wire), so a file with a duplicated key still parses; the last entry wins, as in a map.

A private descriptor pool keeps these classes apart from any other XSpace classes a process
may have loaded (TensorFlow's own, say), whose full names are the same.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "distcore.profile.xspace"
_F = descriptor_pb2.FieldDescriptorProto
_REPEATED = _F.LABEL_REPEATED
_OPTIONAL = _F.LABEL_OPTIONAL

# (name, number, type, label, message type or "", oneof index or None)
_Field = tuple[str, int, int, int, str, "int | None"]

_MESSAGES: dict[str, list[_Field]] = {
    "XSpace": [
        ("planes", 1, _F.TYPE_MESSAGE, _REPEATED, "XPlane", None),
        ("hostnames", 4, _F.TYPE_BYTES, _REPEATED, "", None),
    ],
    "XPlane": [
        ("id", 1, _F.TYPE_INT64, _OPTIONAL, "", None),
        ("name", 2, _F.TYPE_BYTES, _OPTIONAL, "", None),
        ("lines", 3, _F.TYPE_MESSAGE, _REPEATED, "XLine", None),
        ("event_metadata", 4, _F.TYPE_MESSAGE, _REPEATED, "EventMetadataEntry", None),
        ("stat_metadata", 5, _F.TYPE_MESSAGE, _REPEATED, "StatMetadataEntry", None),
        ("stats", 6, _F.TYPE_MESSAGE, _REPEATED, "XStat", None),
    ],
    "EventMetadataEntry": [
        ("key", 1, _F.TYPE_INT64, _OPTIONAL, "", None),
        ("value", 2, _F.TYPE_MESSAGE, _OPTIONAL, "XEventMetadata", None),
    ],
    "StatMetadataEntry": [
        ("key", 1, _F.TYPE_INT64, _OPTIONAL, "", None),
        ("value", 2, _F.TYPE_MESSAGE, _OPTIONAL, "XStatMetadata", None),
    ],
    "XLine": [
        ("id", 1, _F.TYPE_INT64, _OPTIONAL, "", None),
        ("name", 2, _F.TYPE_BYTES, _OPTIONAL, "", None),
        ("timestamp_ns", 3, _F.TYPE_INT64, _OPTIONAL, "", None),
        ("events", 4, _F.TYPE_MESSAGE, _REPEATED, "XEvent", None),
        ("duration_ps", 9, _F.TYPE_INT64, _OPTIONAL, "", None),
        ("display_id", 10, _F.TYPE_INT64, _OPTIONAL, "", None),
        ("display_name", 11, _F.TYPE_BYTES, _OPTIONAL, "", None),
    ],
    "XEvent": [
        ("metadata_id", 1, _F.TYPE_INT64, _OPTIONAL, "", None),
        ("offset_ps", 2, _F.TYPE_INT64, _OPTIONAL, "", 0),
        ("duration_ps", 3, _F.TYPE_INT64, _OPTIONAL, "", None),
        ("stats", 4, _F.TYPE_MESSAGE, _REPEATED, "XStat", None),
        ("num_occurrences", 5, _F.TYPE_INT64, _OPTIONAL, "", 0),
    ],
    "XStat": [
        ("metadata_id", 1, _F.TYPE_INT64, _OPTIONAL, "", None),
        ("double_value", 2, _F.TYPE_DOUBLE, _OPTIONAL, "", 0),
        ("uint64_value", 3, _F.TYPE_UINT64, _OPTIONAL, "", 0),
        ("int64_value", 4, _F.TYPE_INT64, _OPTIONAL, "", 0),
        ("str_value", 5, _F.TYPE_BYTES, _OPTIONAL, "", 0),
        ("bytes_value", 6, _F.TYPE_BYTES, _OPTIONAL, "", 0),
        ("ref_value", 7, _F.TYPE_UINT64, _OPTIONAL, "", 0),
    ],
    "XEventMetadata": [
        ("id", 1, _F.TYPE_INT64, _OPTIONAL, "", None),
        ("name", 2, _F.TYPE_BYTES, _OPTIONAL, "", None),
        ("display_name", 4, _F.TYPE_BYTES, _OPTIONAL, "", None),
        ("stats", 5, _F.TYPE_MESSAGE, _REPEATED, "XStat", None),
        ("child_id", 6, _F.TYPE_INT64, _REPEATED, "", None),
    ],
    "XStatMetadata": [
        ("id", 1, _F.TYPE_INT64, _OPTIONAL, "", None),
        ("name", 2, _F.TYPE_BYTES, _OPTIONAL, "", None),
    ],
}
# The oneof each message's fields point at by index.
_ONEOFS = {"XEvent": ["data"], "XStat": ["value"]}


# The same messages with each line's events left as bytes, one string an event: the bulk
# decoder (bulk.py) reads the events' fields itself, many at a time, where building a message
# object an event is what a large profile's read costs.
_RAW_MESSAGES: dict[str, list[_Field]] = {
    name: [("events", 4, _F.TYPE_BYTES, _REPEATED, "", None) if f[0] == "events" else f
           for f in fields]
    for name, fields in _MESSAGES.items() if name != "XEvent"
}


def _file_descriptor(
    messages: dict[str, list[_Field]] = _MESSAGES,
) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name="distcore/profile/xspace.proto", package=_PACKAGE, syntax="proto3"
    )
    for message_name, fields in messages.items():
        message = proto.message_type.add(name=message_name)
        for oneof in _ONEOFS.get(message_name, []):
            message.oneof_decl.add(name=oneof)
        for name, number, kind, label, type_name, oneof_index in fields:
            field = message.field.add(name=name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
            if oneof_index is not None:
                field.oneof_index = oneof_index
    return proto


def _message_class(pool: descriptor_pool.DescriptorPool, name: str) -> Any:
    descriptor = pool.FindMessageTypeByName(f"{_PACKAGE}.{name}")
    get_class = getattr(message_factory, "GetMessageClass", None)
    if get_class is not None:
        return get_class(descriptor)
    # protobuf 4.21: GetMessageClass came later; the factory's prototype is the same class.
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)  # type: ignore[attr-defined]


@cache
def classes() -> dict[str, Any]:
    """Message classes by name: XSpace, XPlane, XLine, XEvent, XStat, XEventMetadata, ..."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(_file_descriptor().SerializeToString())
    return {name: _message_class(pool, name) for name in _MESSAGES}


@cache
def raw_xspace_class() -> Any:
    """XSpace whose lines hold their events as bytes (`XLine.events`: one string an event)."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(_file_descriptor(_RAW_MESSAGES).SerializeToString())
    return _message_class(pool, "XSpace")


def xspace_class() -> Any:
    return classes()["XSpace"]
