"""The kernel's hparams_event decodes the hparams plugin's usual record exactly as the wire
walker (record.py) does, and leaves every other record to it: generated records of that shape
and of its neighbours (other values, extra or missing fields, padded varints, names that are not
UTF-8, flipped and cut bytes) decode alike on both paths, plugins and updates included."""

from __future__ import annotations

import math
import struct
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distcore.tfrecord.wire as s
from distcore.tfrecord.record import UndecodableError, decode_event
from tests.core.conftest import compiled_kernel
from tests.core.wire_builder import field
from tests.kit.writers import varint

_KEY = s.HPARAMS_RECORD_KEYS
(W, STEP, SUMMARY, VALUE, TAG, TENSOR, META, DATA, NAME, CONTENT, VERSION, START, ENTRY, KEY,
 VAL, NUMBER, STRING, BOOL) = _KEY  # fmt: skip
_NAMES = st.binary(max_size=12) | st.sampled_from([b"lr", b"\xff", "ü".encode(), b""])


@st.composite
def _value(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["number", "string", "bool", "null", "list", "two", "empty"]))
    if kind == "number":
        return bytes([NUMBER]) + struct.pack("<d", draw(st.floats()))
    if kind == "string":
        return field(STRING, draw(_NAMES), draw(st.integers(1, 2)))
    if kind == "bool":
        return bytes([BOOL]) + varint(draw(st.integers(0, 2**64 - 1)), draw(st.integers(1, 10)))
    if kind == "null":
        return b"\x08\x00"
    if kind == "list":
        return field(0x32, field(0x0A, bytes([NUMBER]) + bytes(8)))
    if kind == "two":
        return bytes([NUMBER]) + bytes(8) + field(STRING, b"x")
    return b""


@st.composite
def _record(draw: st.DrawFn) -> bytes:
    entries = b"".join(
        field(ENTRY, field(KEY, draw(_NAMES)) + field(VAL, draw(_value())))
        for _ in range(draw(st.integers(0, 4)))
    )
    version = bytes([VERSION]) + varint(draw(st.integers(0, 3))) if draw(st.booleans()) else b""
    content = version + field(START, entries, draw(st.integers(1, 2)))
    plugin = draw(st.sampled_from([b"hparams", b"hparams", b"scalars", b"hparam"]))
    meta = field(DATA, field(NAME, plugin) + field(CONTENT, content))
    tensor = field(TENSOR, b"\x08\x07") if draw(st.booleans()) else b""
    value = field(TAG, draw(_NAMES) or b"_hparams_/session_start_info") + tensor
    value += field(META, meta)
    event = bytes([W]) + struct.pack("<d", draw(st.floats())) if draw(st.booleans()) else b""
    if draw(st.booleans()):
        event += bytes([STEP]) + varint(draw(st.integers(0, 2**64 - 1)), draw(st.integers(1, 10)))
    event += field(SUMMARY, field(VALUE, value))
    data = bytearray(event)
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        at = draw(st.integers(0, max(0, len(data) - 1)))
        how = draw(st.sampled_from(["flip", "cut", "insert"]))
        if how == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "cut":
            del data[at : at + draw(st.integers(1, 4))]
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=3))
    return bytes(data)


def _decoded(data: bytes, compiled: ModuleType | None) -> object:
    plugins: dict[str, str] = {"_hparams_/session_start_info": "scalars"}
    updates: list[tuple[str, str]] = []
    try:
        event = decode_event(data, plugins, updates, compiled)
        out: object = (
            struct.pack("<d", event.wall_time), event.step, event.scalars, event.session_start,
            event.histograms,
            None if event.hparams is None else [
                (k, type(v), struct.pack("<d", v) if isinstance(v, float) else v)
                for k, v in event.hparams.items()
            ],
        )  # fmt: skip
    except UndecodableError:  # (its wording differs between the walkers: not compared)
        out = "undecodable"
    return out, plugins, updates


@settings(max_examples=400, deadline=None)
@given(_record())
def test_hparams_records_decode_alike_in_c_and_python(data: bytes) -> None:
    assert _decoded(data, compiled_kernel()) == _decoded(data, None)


def test_the_usual_record_is_decoded_in_c() -> None:
    """The shape Keras' hparams callback and the sweep benchmark write is the kernel's."""
    entry = field(ENTRY, field(KEY, b"lr") + field(VAL, bytes([NUMBER]) + struct.pack("<d", 0.1)))
    content = bytes([VERSION, 0]) + field(START, entry)
    meta = field(DATA, field(NAME, b"hparams") + field(CONTENT, content))
    value = field(TAG, b"_hparams_/session_start_info") + field(TENSOR, b"\x08\x07")
    data = bytes([W]) + struct.pack("<d", 1.5) + bytes([STEP, 3])
    data += field(SUMMARY, field(VALUE, value + field(META, meta)))
    found = compiled_kernel().hparams_event(data, bytes(_KEY), b"hparams")
    assert found == (1.5, 3, "_hparams_/session_start_info", {"lr": 0.1})
    assert _decoded(data, compiled_kernel()) == _decoded(data, None)
    assert not math.isnan(found[0])


def test_hparams_event_refuses_bad_keys() -> None:
    with pytest.raises(ValueError, match="bad keys"):
        compiled_kernel().hparams_event(b"", b"\x09", b"hparams")
