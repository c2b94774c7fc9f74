"""Hostile logdirs for the untrusted-input tests: event protos whose names may be any bytes, in
the kit's TFRecord framing (tests/kit/writers.py; its bytes are checked against google_crc32c).

TensorBoard's protos refuse a `string` field that is not UTF-8, so a Value's tag is written by
hand in front of the proto's own serialisation (field order does not matter on the wire), and
the Event's step and wall time are written by hand too, so that any 64-bit pattern fits.
"""

from __future__ import annotations

import os
import struct
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st
from tensorboard.compat.proto import summary_pb2, tensor_pb2, types_pb2

from tests.kit.writers import record, varint

EVENT_FILE = "events.out.tfevents.1700000000.host.1.v2"


def _field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


@dataclass(frozen=True)
class Point:
    tag: bytes
    step: int
    value: float
    wall_time: float
    kind: str = "simple"  # "simple" (simple_value), "double" or "float" (TF2 scalar tensors)


def value_bytes(point: Point) -> bytes:
    if point.kind == "simple":
        proto = summary_pb2.Summary.Value(simple_value=point.value)
    else:
        dtype = types_pb2.DT_DOUBLE if point.kind == "double" else types_pb2.DT_FLOAT
        tensor = tensor_pb2.TensorProto(dtype=dtype)
        (tensor.double_val if point.kind == "double" else tensor.float_val).append(point.value)
        meta = summary_pb2.SummaryMetadata()
        meta.plugin_data.plugin_name = "scalars"
        proto = summary_pb2.Summary.Value(metadata=meta, tensor=tensor)
    return _field(1, point.tag) + proto.SerializeToString()


def event_bytes(point: Point) -> bytes:
    summary = _field(1, value_bytes(point))
    head = b"\x09" + struct.pack("<d", point.wall_time) + b"\x10" + varint(point.step)
    return head + _field(5, summary)


def write_run(run_dir: Path, points: Iterable[Point], tail: bytes = b"") -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / EVENT_FILE
    path.write_bytes(b"".join(record(event_bytes(p)) for p in points) + tail)
    return path


# --- hypothesis strategies ---------------------------------------------------------------------

HOSTILE_NAMES = [
    b"loss",
    b"\x1b[31mred\x1b[0m",
    b"\x1b]0;pwned\x07",
    b"a\nb\tc\r",
    b"\xff\xfe",
    b"\xc3",
    b"caf\xc3\xa9",
    b"\xe2\x80\xae evil",  # U+202E, right-to-left override
    b"[bold]markup[/]",
    b"x" * 10_000,
]
EXTREME_FLOATS = [0.0, -0.0, 1.0, 1e300, -1e300, 5e-324, float("nan"), float("inf"), float("-inf")]
EXTREME_STEPS = [0, 1, -1, 2**63 - 1, -(2**63), 2**62, 2**63, 2**64 - 1]

names = st.sampled_from(HOSTILE_NAMES) | st.binary(min_size=1, max_size=24)
numbers = st.sampled_from(EXTREME_FLOATS) | st.floats(allow_nan=True, allow_infinity=True)
steps = st.sampled_from(EXTREME_STEPS) | st.integers(-(2**63), 2**64 - 1)
points = st.builds(
    Point,
    tag=names,
    step=steps,
    value=numbers,
    wall_time=numbers,
    kind=st.sampled_from(["simple", "double", "float"]),
)


def dir_name(raw: bytes) -> bytes:
    """A directory name from any bytes: no slash, no NUL, not empty, not '.' or '..', short
    enough for the filesystem; the bytes are kept otherwise."""
    name = raw.replace(b"/", b"_").replace(b"\x00", b"_")[:200] or b"_"
    return b"_" + name if name in (b".", b"..") else name


@st.composite
def logdirs(draw: st.DrawFn) -> list[tuple[bytes, list[Point], bytes]]:
    """Runs as (directory name, points, trailing bytes): well-framed records with any field
    values, then maybe garbage (a torn record, a lying length, random bytes)."""
    runs = draw(st.lists(st.tuples(names, st.lists(points, max_size=12)), max_size=3))
    tails = st.sampled_from([b"", b"\x00" * 16, struct.pack("<Q", 2**62) + b"\x00" * 4])
    return [(dir_name(n), pts, draw(tails | st.binary(max_size=40))) for n, pts in runs]


def write_logdir(root: Path, runs: Sequence[tuple[bytes, list[Point], bytes]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, pts, tail in runs:
        write_run(Path(os.fsdecode(bytes(root) + b"/" + name)), pts, tail)
    return root


def control_characters(text: str) -> list[str]:
    """Characters a terminal would act on (newline aside), as `repr`s for a readable failure."""
    bad = {"\u2028", "\u2029", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F))}
    bad |= {chr(c) for c in range(0x2066, 0x206A)}
    return [
        repr(c) for c in text if c != "\n" and (unicodedata.category(c) in ("Cc", "Cs") or c in bad)
    ]


def hparams_event(hparams: dict[str, str | float | bool], wall_time: float = 1.0) -> bytes:
    """A session-start record of the HParams plugin, as hp.hparams() writes it."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    data = plugin_data_pb2.HParamsPluginData(version=0)
    for name, value in hparams.items():
        slot = data.session_start_info.hparams[name]
        if isinstance(value, bool):
            slot.bool_value = value
        elif isinstance(value, str):
            slot.string_value = value
        else:
            slot.number_value = value
    meta = summary_pb2.SummaryMetadata()
    meta.plugin_data.plugin_name = "hparams"
    meta.plugin_data.content = data.SerializeToString()
    value = summary_pb2.Summary.Value(tag="_hparams_/session_start_info", metadata=meta)
    summary = _field(1, value.SerializeToString())
    return b"\x09" + struct.pack("<d", wall_time) + _field(5, summary)
