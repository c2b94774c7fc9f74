"""wire.validate walks a plan read once from each descriptor: it accepts and refuses exactly
what walking the descriptor itself on every call accepted and refused (same error, same
depth limit)."""

from __future__ import annotations

import pytest
from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.hparams import plugin_data_pb2

from distcore.tfrecord.wire import (
    WIRE_LEN,
    WireError,
    as_bytes,
    expected_wire_types,
    fields,
    validate,
)
from tests.core.wire_builder import field

_MESSAGES = [
    plugin_data_pb2.HParamsPluginData.DESCRIPTOR,
    summary_pb2.SummaryMetadata.DESCRIPTOR,
    struct_pb2.Value.DESCRIPTOR,
]


def _reference(data: bytes, message: Descriptor, depth: int = 0) -> None:
    """validate as it was: the descriptor looked up on every call."""
    if depth > 100:
        raise WireError("messages nested too deeply")
    by_number = message.fields_by_number
    for number, wire_type, raw in fields(data, expected_wire_types(message)):
        f = by_number.get(number)
        inner = f.message_type if f is not None and wire_type == WIRE_LEN else None
        if inner is not None:
            _reference(as_bytes(raw), inner, depth + 1)


def _outcome(check: object, data: bytes, message: Descriptor) -> str | None:
    try:
        check(data, message)  # type: ignore[operator]
    except WireError as err:
        return str(err)
    return None


def _hparams(draw: st.DrawFn) -> bytes:
    """Mostly well-formed HParams records with a few bytes changed."""
    info = plugin_data_pb2.SessionStartInfo()
    for name in draw(st.lists(st.text(max_size=4), max_size=3)):
        info.hparams[name].number_value = draw(st.floats(allow_nan=False))
    data = bytearray(plugin_data_pb2.HParamsPluginData(session_start_info=info).SerializeToString())
    for _ in range(draw(st.integers(0, 2))):
        if data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


@settings(max_examples=300, deadline=None)
@given(data=st.one_of(st.binary(max_size=64), st.composite(_hparams)()),
       message=st.sampled_from(_MESSAGES))  # fmt: skip
def test_validate_refuses_exactly_what_the_descriptor_walk_refused(
    data: bytes, message: Descriptor
) -> None:
    assert _outcome(validate, data, message) == _outcome(_reference, data, message)


def _nested(levels: int) -> bytes:
    """A google.protobuf.Value that holds a list holding a Value, `levels` times over."""
    data = bytes([0x11]) + bytes(8)  # number_value: 0.0
    for _ in range(levels):
        data = field(0x32, field(0x0A, data))  # list_value { values { ... } }
    return data


@pytest.mark.parametrize(("levels", "error"), [(50, None), (51, "messages nested too deeply")])
def test_validate_keeps_protobufs_depth_limit(levels: int, error: str | None) -> None:
    data = _nested(levels)
    message = struct_pb2.Value.DESCRIPTOR
    assert _outcome(validate, data, message) == _outcome(_reference, data, message) == error
