"""The bulk decoder held to the message decoder, its reference: on every file, the same
summary, or both say the file is unreadable. Files written as TensorFlow lays them out, the
bench's large one, and events built field by field on the wire, odd ones included."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from distcore.profile.analyze import summarize_bytes
from distcore.profile.bulk import _varint
from distcore.profile.decode import ProfileUnreadable
from distcore.profile.schema import classes, raw_xspace_class
from distcore.profile.summary import ProfileSummary
from tests.core.profile_files import MS, Ev, LineSpec, hostile_space, space, training_steps

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from profile_read import build


def _both(data: bytes) -> ProfileSummary | None:
    """The summary both decoders give (None: both found the file unreadable)."""
    try:
        want: ProfileSummary | None = summarize_bytes(data, "p", reference=True)
    except ProfileUnreadable:
        want = None
    try:
        got: ProfileSummary | None = summarize_bytes(data, "p")
    except ProfileUnreadable:
        got = None
    assert got == want
    return got


def _gpu() -> list[LineSpec]:
    return [
        LineSpec("Stream #7(Compute)", [
            Ev("volta_sgemm_128x64_nn", 1 * MS, 3 * MS, {"correlation_id": 5}),
            Ev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 4 * MS, 2 * MS),
            Ev("volta_sgemm_128x64_nn", 7 * MS, MS)]),
        LineSpec("Stream #13(MemcpyH2D)", [Ev("MemcpyH2D", 0, MS // 2), Ev("Memset", MS, 5)]),
        LineSpec("Launch Stats", [Ev("volta_sgemm_128x64_nn", 0, 9 * MS)]),
        LineSpec("Stream #14(empty)", []),
    ]


def _nested() -> list[LineSpec]:
    """Ops that nest, overlap, touch and repeat, beside ops alone in their time."""
    calls = [Ev("call:StatefulPartitionedCall", 0, 10 * MS), Ev("a/MatMul:MatMul", 2 * MS, 6 * MS),
             Ev("a/Relu:Relu", 3 * MS, 9 * MS), Ev("a/Add:AddV2", 8 * MS, 0),
             Ev("b/MatMul:MatMul", 20 * MS, MS), Ev("c/Mul:Mul", 21 * MS, MS),
             Ev("d/Mul:Mul", 22 * MS, MS), Ev("d/Mul:Mul", 22 * MS, MS),
             Ev("e/AllReduce:CollectiveReduceV2", 30 * MS, 2 * MS)]
    return [LineSpec("tf_Compute/1", calls), LineSpec("tf_Compute/2", calls[::-1])]


def test_profiles_written_as_tensorflow_writes_them_read_the_same() -> None:
    files = [
        space({"/host:CPU": training_steps(40)}),
        space({"/host:CPU": training_steps(7, with_r=False, marker="Profiled batch")}),
        space({"/host:CPU": training_steps(9)[1:]}),  # no markers: steps from get-next
        space({"/host:CPU": training_steps(3), "/device:GPU:0": _gpu(), "/device:GPU:1": _gpu()},
              hostnames=["worker-0"]),
        space({"/host:CPU": _nested()}),
        space({"/device:GPU:0": _gpu()}),
        hostile_space(),
    ]
    for message in files:
        assert _both(message.SerializeToString()) is not None
    nothing = space({"/host:CPU": [], "other": training_steps(2)})  # no event on host or GPU
    assert _both(nothing.SerializeToString()) is None


def test_many_threads_and_streams_read_the_same() -> None:
    """Each thread's ops nest on their own: a long op on one thread holds nothing of the
    next; one line of the hundreds here ends late, others start before it ends."""
    threads = [LineSpec(f"tf_Compute/{n}", [
        Ev(f"t{n}/Long:StatefulPartitionedCall", (n % 7) * MS, (200 - n) * MS),
        *(Ev(f"t{n}/a:MatMul", (n % 5 + k) * MS, MS // (k + 1)) for k in range(3)),
        Ev(f"t{n}/b:Relu", (n % 3) * MS, 2 * MS),
    ]) for n in range(150)]
    streams = [LineSpec(f"Stream #{n}", [Ev(f"k{n % 9}", n * MS, MS), Ev("MemcpyD2H", 0, n)])
               for n in range(120)]
    message = space({"/host:CPU": [*threads, *training_steps(3)], "/device:GPU:0": streams})
    summary = _both(message.SerializeToString())
    assert summary is not None and len(summary.streams) == 64


def test_the_benchs_profile_reads_the_same() -> None:
    summary = _both(build(40_000))
    assert summary is not None and summary.step_count > 90


# An event on the wire: its fields, each a tag and a value; mostly the plain fields
# (metadata_id 1, offset_ps 2, duration_ps 3, num_occurrences 5, an unknown 7), as often
# with values the names and times of the file meet as with any 64-bit value.
_WIDE = st.integers(-(2**63), 2**64 - 1) | st.integers(2**56 - 3, 2**56 + 3)
_VALUES = {
    1: st.integers(0, 8) | _WIDE,
    2: st.integers(0, 40).map(lambda n: n * MS // 4) | _WIDE,
    3: st.integers(0, 40).map(lambda n: n * MS // 4) | _WIDE,
    5: st.sampled_from([0, 0, 1, 3]) | _WIDE,
    7: _WIDE,
}


@st.composite
def _varint_field(draw: st.DrawFn) -> bytes:
    number = draw(st.sampled_from([1, 2, 3, 5, 1, 2, 3, 7]))
    value = draw(_VALUES[number])
    return _varint(number << 3) + _varint(value % 2**64 if value < 2**64 else value)


@st.composite
def _stat(draw: st.DrawFn, junk: bool) -> bytes:
    out = b"\x08" + _varint(draw(st.integers(0, 4)))  # metadata_id: 1 is step_num
    kinds = ["int", "uint", "str", "double", "ref", "none"] + ["junk"] * junk
    kind = draw(st.sampled_from(kinds))
    value = draw(st.integers(-(2**63), 2**63 - 1))
    if kind == "int":
        out += b"\x20" + _varint(value % 2**64)
    elif kind == "uint":
        out += b"\x18" + _varint(value % 2**64)
    elif kind == "str":
        text = draw(st.binary(max_size=6))
        out += b"\x2a" + _varint(len(text)) + text
    elif kind == "double":
        out += b"\x11" + draw(st.binary(min_size=8, max_size=8))
    elif kind == "ref":
        out += b"\x38" + _varint(draw(st.integers(0, 4)))
    elif kind == "junk":
        out += draw(st.binary(max_size=4))
    return out


@st.composite
def _event(draw: st.DrawFn, junk: bool) -> bytes:
    """An event; with `junk`, bytes that may be no protobuf at all."""
    out = b""
    for _ in range(draw(st.integers(0, 6))):
        choice = draw(st.sampled_from(["varint"] * 6 + ["stat", "other"] + ["raw"] * junk))
        if choice == "varint":
            out += draw(_varint_field())
        elif choice == "stat":
            stat = draw(_stat(junk))
            out += b"\x22" + _varint(len(stat)) + stat
        elif choice == "other":  # a known field under another wire type, fixed widths, groups
            out += draw(st.sampled_from([b"\x0a\x01x", b"\x11" + bytes(8), b"\x1d" + bytes(4),
                                         b"\x20\x05", b"\x43\x44", b"\x13\x14"]
                                        + [b"\x00\x01"] * junk))
        else:
            out += draw(st.binary(max_size=5))
    return out


_NAMES = [b"train", b"IteratorGetNextOp::DoCompute", b"Iterator::Root::Map",
          b"x/MatMul:MatMul", b"all:CollectiveReduceV2", b"MemcpyH2D", b"nccl_AllReduce"]


def _file(planes: list[tuple[bytes, list[tuple[bytes, int, list[bytes]]]]]) -> bytes:
    message = raw_xspace_class()()
    for name, lines in planes:
        plane = message.planes.add(name=name)
        for key, text in enumerate(_NAMES, start=1):
            entry = plane.event_metadata.add(key=key)
            entry.value.name = text
            entry.value.stats.add(metadata_id=3, int64_value=key)
        for key, text in enumerate([b"step_num", b"id", b"parent_id", b"parallelism"], 1):
            plane.stat_metadata.add(key=key).value.name = text
        for line_name, stamp, events in lines:
            plane.lines.add(name=line_name, timestamp_ns=stamp).events.extend(events)
    data: bytes = message.SerializeToString()
    return data


def _planes(junk: bool) -> st.SearchStrategy[list[tuple[bytes, list[Any]]]]:
    lines = st.lists(st.tuples(
        st.sampled_from([b"python", b"tf_Compute/1", b"tf_data_x", b"Stream #1", b"other"]),
        st.integers(0, 2**62) | st.just(1000), st.lists(_event(junk), max_size=12)), max_size=4)
    names = st.sampled_from([b"/host:CPU", b"/device:GPU:0", b"x"])
    return st.lists(st.tuples(names, lines), max_size=3)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planes=st.booleans().flatmap(_planes))
@example(planes=[(b"/host:CPU", [(b"python", 0, [
    b"\x08\x01\x10\x05\x18\x0a\x22\x02\x08\x01",  # a marker, step 0, at 5 ps
    b"\x08\x01\x10\x05\x28\x00\x18\x0a\x22\x04\x08\x01\x20\x02",  # its offset undone
    b"\x08\x01\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x18\x0a\x22\x02\x08\x01",
])])])
def test_events_built_on_the_wire_read_the_same(
    planes: list[tuple[bytes, list[tuple[bytes, int, list[bytes]]]]]
) -> None:
    _both(_file(planes))


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300))
@example(data=b"\x0a\x08\x1a\x06\x22\x04\x08\x01\x10\x80")
def test_random_bytes_read_the_same(data: bytes) -> None:
    _both(data)


@pytest.mark.parametrize("cut", [1, 7, 100, 1001])
def test_truncated_files_read_the_same(cut: int) -> None:
    data = classes()["XSpace"].SerializeToString(space({"/host:CPU": training_steps(30)}))
    _both(data[:-cut])
