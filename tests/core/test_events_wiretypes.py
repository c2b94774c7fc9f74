"""Records with fields of any number and wire type, mixed with good ones, through the whole path.

Protobuf's parsers reject field number 0, wire types 6 and 7 and unbalanced groups; prost (the
Rust data server's decoder) also rejects a known field in a wire type its type never takes. Such
a record is one problem of its own: the rest of its file is read, its step never restarts a
series, and the grouped decoder agrees with the per-record one on every byte.
"""

from __future__ import annotations

import io
import json
import re
import struct
import tempfile
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto import event_pb2, summary_pb2

import distcore.tfrecord.wire as s
from distcore.events import load_once
from distcore.tfrecord.wire import Expected, WireError, expected_wire_types, fields, validate
from distmon.cli import main
from tests.core.events_helpers import assert_files_decode_alike
from tests.core.wire_builder import field
from tests.kit.sshd import Sshd
from tests.kit.writers import record, varint

_EVENT = expected_wire_types(event_pb2.Event.DESCRIPTOR)
_VALUE = expected_wire_types(summary_pb2.Summary.Value.DESCRIPTOR)
_GOOD_TYPES = (s.WIRE_VARINT, s.WIRE_FIXED64, s.WIRE_LEN, s.WIRE_START_GROUP, s.WIRE_FIXED32)


def raw_field(number: int, wire_type: int, payload: bytes) -> bytes:
    """A field as given: a payload of the size its wire type needs (a group: empty, closed)."""
    key = varint((number << 3) | wire_type)
    if wire_type == s.WIRE_VARINT:
        return key + varint(int.from_bytes(payload[:8], "little"))
    if wire_type == s.WIRE_FIXED64:
        return key + payload[:8].ljust(8, b"\0")
    if wire_type == s.WIRE_FIXED32:
        return key + payload[:4].ljust(4, b"\0")
    if wire_type == s.WIRE_LEN:
        return key + varint(len(payload)) + payload
    if wire_type == s.WIRE_START_GROUP:
        return key + varint((number << 3) | s.WIRE_END_GROUP)
    return key + payload  # END_GROUP alone, 6, 7: malformed whatever follows


def is_bad(number: int, wire_type: int, known: Expected) -> bool:
    """The oracle: what protobuf and prost refuse."""
    if number == 0 or wire_type not in _GOOD_TYPES:
        return True
    return number in known and wire_type not in known[number]


# A stray field: a known number in any wire type, an unknown one, 0, or a large one.
stray = st.tuples(
    st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 15, 16, 17, 100, 2**29 - 1])
    | st.integers(0, 2**29 - 1),
    st.integers(0, 7),
    st.binary(max_size=12),
)


def _value(step: int, strays: list[tuple[int, int, bytes]]) -> bytes:
    out = field(s.K_TAG, b"loss") + bytes([s.K_SIMPLE]) + struct.pack("<f", float(step))
    return out + b"".join(raw_field(*f) for f in strays)


@st.composite
def mixed_file(draw: st.DrawFn) -> tuple[bytes, list[int], int]:
    """(file bytes, steps of the good records, count of bad ones). Good records count up from
    1000; a bad one claims step 0, so were it kept it would restart the series."""
    out, good, bad = [], [], 0
    for i in range(draw(st.integers(1, 40))):
        step = 1000 + i
        at_event = draw(st.lists(stray, max_size=2)) if draw(st.booleans()) else []
        at_value = draw(st.lists(stray, max_size=2)) if draw(st.booleans()) else []
        wrong = any(is_bad(n, w, _EVENT) for n, w, _ in at_event)
        wrong |= any(is_bad(n, w, _VALUE) for n, w, _ in at_value)
        # Strays that reuse a known number in its own type would change the point: skip them.
        at_event = [f for f in at_event if f[0] not in _EVENT or is_bad(f[0], f[1], _EVENT)]
        at_value = [f for f in at_value if f[0] not in _VALUE or is_bad(f[0], f[1], _VALUE)]
        summary = field(s.K_SUMMARY, field(s.K_VALUE, _value(step, at_value)))
        head = bytes([s.K_WALL]) + struct.pack("<d", 1.7e9 + i)
        head += bytes([s.K_STEP]) + varint(0 if wrong else step)
        extra = b"".join(raw_field(*f) for f in at_event)
        where = draw(st.integers(0, 2))  # strays before, between or after the known fields
        event = [extra + head + summary, head + extra + summary, head + summary + extra][where]
        out.append(record(event))
        if wrong:
            bad += 1
        else:
            good.append(step)
    return b"".join(out), good, bad


def _write(root: Path, data: bytes) -> None:
    (root / "run").mkdir()
    (root / "run" / "events.out.tfevents.1.host").write_bytes(data)


def _undecodable(problems: tuple[str, ...] | list[str]) -> int:
    found = [re.search(r"undecodable record x(\d+)", p) for p in problems]
    return sum(int(m.group(1)) for m in found if m)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_file())
def test_a_malformed_record_costs_only_itself(case: tuple[bytes, list[int], int]) -> None:
    data, good, bad = case
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write(root, data)
        assert_files_decode_alike(root)  # grouped == per-record
        (run,) = load_once([root])
        steps = list(run.scalars["loss"].steps) if "loss" in run.scalars else []
        assert steps == good
        assert _undecodable(run.problems) == bad
        assert not [p for p in run.problems if "undecodable" not in p]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_file())
def test_once_json_keeps_every_good_point(case: tuple[bytes, list[int], int]) -> None:
    data, good, bad = case
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write(root, data)
        out = io.StringIO()
        with redirect_stdout(out):
            code = main(["--once", "--json", "--poll", "--no-gpu", str(root)])
        assert code == 0
        (run,) = json.loads(out.getvalue())["runs"]
        loss = run["scalars"].get("loss")
        assert (loss["count"], loss["last_step"]) == (len(good), good[-1]) if good else not loss
        assert _undecodable(run["problems"]) == bad


@pytest.mark.parametrize(
    ("data", "ok"),
    [
        (b"\x08\x05", True),  # field 1 varint
        (b"\x00\x05", False),  # field 0
        (b"\x02\x01\x05", False),  # field 0, LEN
        (b"\xfb\x01\x08\x01\xfc\x01\x10\x03", True),  # a group of an unknown field, skipped
        (b"\xfb\x01\xfc\x02", False),  # a group closed by another number
        (b"\xfc\x01", False),  # an end of group alone
        (b"\xfb\x01", False),  # an unterminated group
        (b"\xfe\x01", False),  # wire type 6
        (b"\xf8\xff\xff\xff\x0f\x01", True),  # field 2**29 - 1
        (b"\x80\x80\x80\x80\x10\x01", False),  # a key past 32 bits
        (b"\x88\x80\x80\x80\x00\x01", True),  # a padded key
        (b"\x10" + b"\x80" * 10 + b"\x01", False),  # an 11-byte varint
    ],
)
def test_the_wire_walker_refuses_what_protobuf_refuses(data: bytes, ok: bool) -> None:
    try:
        event_pb2.Event.FromString(data)
        protobuf_ok = True
    except Exception:  # upb raises DecodeError, older backends other errors
        protobuf_ok = False
    assert protobuf_ok == ok
    try:
        list(fields(data))
        walker_ok = True
    except WireError:
        walker_ok = False
    assert walker_ok == ok


def test_a_known_field_in_another_wire_type_is_refused() -> None:
    step_as_len = b"\x12\x01\x05"
    with pytest.raises(WireError):
        validate(step_as_len, event_pb2.Event.DESCRIPTOR)
    validate(b"\x10\x05", event_pb2.Event.DESCRIPTOR)


# Records protobuf refuses that the walker once let through or raised on (struct.error).
_BAD_RECORDS = [
    b"\x0d\0\0\0\0\x10\x00",  # wall_time as a fixed32, then step 0
    bytes([s.K_WALL]) + bytes(8) + b"\x10\x00" + field(
        s.K_SUMMARY, field(s.K_VALUE, field(s.K_TAG, b"loss") + b"\x11" + bytes(8))
    ),  # simple_value as a fixed64
    bytes([s.K_WALL]) + bytes(8) + b"\x10\x00\x00\x05" + field(
        s.K_SUMMARY, field(s.K_VALUE, _value(0, []))
    ),  # field number 0
]


def _mixed_records() -> bytes:
    from tests.kit.writers import scalar_event

    good = [record(scalar_event("loss", step, float(step))) for step in range(1, 7)]
    return b"".join(good[:3] + [record(b) for b in _BAD_RECORDS] + good[3:])


def test_over_ssh_a_malformed_record_costs_only_itself(
    sshd: Sshd, tmp_path: Path
) -> None:
    from distcore.events.store import RunStore
    from distcore.remote import make_remote_producers
    from distcore.remote.spec import SshSpec
    from tests.kit.sshd import HOST_ALIAS
    from tests.kit.writers import scalar_records

    logdir = tmp_path / "runs"
    for name, data in (("bad", _mixed_records()), ("good", scalar_records("loss", [(1, 1.0)]))):
        (logdir / name).mkdir(parents=True)
        (logdir / name / "events.out.tfevents.1.h").write_bytes(data)
    store = RunStore()
    remote = make_remote_producers(
        [SshSpec(HOST_ALIAS, None, str(logdir))], store,
        ssh_config=sshd.config, gpus=False,
    )  # fmt: skip
    try:
        remote.scan_once()
        assert remote.errors() == ()
        bad, good = store.get(f"{HOST_ALIAS}:bad"), store.get(f"{HOST_ALIAS}:good")
        assert bad is not None and good is not None
        assert list(bad.scalars["loss"].steps) == [1, 2, 3, 4, 5, 6]
        assert _undecodable(bad.problems) == len(_BAD_RECORDS)
        assert list(good.scalars["loss"].steps) == [1]
    finally:
        remote.close()


def test_locally_the_same_records_cost_only_themselves(tmp_path: Path) -> None:
    _write(tmp_path, _mixed_records())
    (run,) = load_once([tmp_path])
    assert list(run.scalars["loss"].steps) == [1, 2, 3, 4, 5, 6]
    assert _undecodable(run.problems) == len(_BAD_RECORDS)
