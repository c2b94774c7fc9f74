"""The compiled kernel (distcore/tfrecord/_kernel*.c) gives what the reference path gives.

Every test here runs both paths and compares them: on the wild corpus, on the writers' long
stretches, and on hostile bytes (truncated frames, bad CRCs, huge lengths, garbage inside valid
frames, wrong wire types). The kernel's functions are also called directly with arguments that
would read outside the buffer: they must refuse them, never read there.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from types import ModuleType

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distcore.tfrecord.wire as s
from distcore.tfrecord import PADDING, decode, kernel
from distcore.tfrecord.framing import frame
from tests.core.conftest import compiled_kernel
from tests.core.events_helpers import WILD, batch_key, require_wild
from tests.core.wire_builder import event_file, events, field, run_file, tensor
from tests.kit.writers import record, varint

BUILT = kernel._load() if os.environ.get("DISTMON_PURE", "") in ("", "0") else None


def _framed(data: bytes, compiled: ModuleType | None) -> object:
    raw = bytearray(data) + bytes(PADDING)
    frames = frame(raw, np.frombuffer(raw, np.uint8), len(data), compiled)
    return frames.starts.tolist(), frames.lengths.tolist(), frames.end, frames.problems


def assert_paths_agree(data: bytes) -> None:
    """The kernel's path and the reference path make the same of `data`: framing, the batch,
    the bytes consumed and the plugins after it."""
    before, kernel.ACTIVE = kernel.ACTIVE, BUILT
    try:
        plugins_fast: dict[str, str] = {}
        plugins_ref: dict[str, str] = {}
        fast, used = decode(data, plugins_fast)
        reference, used_ref = decode(data, plugins_ref, reference=True)
    finally:
        kernel.ACTIVE = before
    assert _framed(data, BUILT) == _framed(data, None)
    assert (used, batch_key(fast), plugins_fast) == (used_ref, batch_key(reference), plugins_ref)


def test_the_wild_corpus_decodes_the_same_on_both_paths() -> None:
    compiled_kernel()
    require_wild()
    files = sorted(p for p in WILD.rglob("*tfevents*") if p.is_file())
    assert files
    for file in files:
        assert_paths_agree(file.read_bytes())


# What may follow a scalar inside its Summary.Value: nothing, metadata, a field the fast path
# must refuse to skip (an invalid key, wire type 7, a truncated varint), or any bytes.
TAILS = st.sampled_from(
    [b"", field(s.K_METADATA, s.SCALARS_METADATA), field(s.K_METADATA, b"\x0a\x02\x0a"),
     field(s.K_METADATA, s.SCALARS_METADATA + b"\x07"),
     field(s.K_METADATA, s.SCALARS_METADATA[:-1]),
     b"\x07", b"\x00", b"\x4a", b"\x4a\x80", b"\x15\x00\x00\x80\x3f", b"\x4a\x0b"]
) | st.binary(max_size=12)


DEFECTS = ["none", "tail", "wall key", "summary key", "value key", "tag key",
           "summary length", "value length", "step width"]


@st.composite
def almost_scalar(draw: st.DrawFn) -> bytes:
    """A scalar event of a writer's layout with at most one defect: a tail inside its Value,
    one key in another wire type or of another field, a nested length one off, a step varint
    of eleven bytes. Nested lengths are right unless the defect is one."""
    defect = draw(st.sampled_from(DEFECTS))

    def key(name: str, right: int) -> int:
        wrong = [right ^ 1, right ^ 2, right ^ 7, right + 8, right - 8]
        return draw(st.sampled_from(wrong)) if defect == f"{name} key" else right

    def lie(name: str) -> int:
        return draw(st.sampled_from([-1, 1])) if defect == f"{name} length" else 0

    kind = draw(st.sampled_from(["simple", "f32", "f64"]))
    number = draw(st.floats(width=32))
    tag = field(key("tag", s.K_TAG), draw(st.sampled_from([b"loss", b"x" * 96, b"y" * 97, b""])))
    if kind == "simple":
        payload = bytes([s.K_SIMPLE]) + struct.pack("<f", number)
    else:
        payload = field(s.K_TENSOR, tensor(kind, number))
    tail = draw(TAILS) if defect == "tail" else b""
    summary = lying_field(key("value", s.K_VALUE), tag + payload + tail, lie("value"))
    width = 11 if defect == "step width" else draw(st.integers(1, 10))
    step = bytes([s.K_STEP]) + varint(draw(st.integers(0, 2**40)), width)
    body = lying_field(key("summary", s.K_SUMMARY), summary, lie("summary"))
    return bytes([key("wall", s.K_WALL)]) + bytes(8) + step + body


def lying_field(key: int, payload: bytes, lie: int) -> bytes:
    return bytes([key]) + varint(max(0, len(payload) + lie)) + payload


@st.composite
def framed_garbage(draw: st.DrawFn) -> bytes:
    """Valid frames around payloads that are almost events: a scalar with a tail, one byte of
    an event changed (a key's wire type, a length, a varint's continuation bit), any bytes."""
    out = []
    payloads = st.lists(events([b"loss", b"acc"]) | almost_scalar() | st.binary(max_size=60),
                        max_size=12)  # fmt: skip
    for payload in draw(payloads):
        data = bytearray(payload)
        if data and draw(st.integers(0, 3)) == 0:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        out.append(record(bytes(data)))
    return b"".join(out)


@st.composite
def hostile(draw: st.DrawFn) -> bytes:
    """A file cut anywhere, or with a header claiming more than any buffer."""
    data = draw(event_file() | run_file() | framed_garbage())
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.booleans()):
        length = draw(st.sampled_from([2**64 - 1, 2**63, 256 << 20, (256 << 20) + 1, 2**32]))
        data += struct.pack("<Q", length) + bytes(4) + data[:40]
    return data


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile())
def test_hostile_bytes_decode_the_same_on_both_paths(data: bytes) -> None:
    compiled_kernel()
    assert_paths_agree(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(framed_garbage())
def test_almost_events_decode_the_same_on_both_paths(data: bytes) -> None:
    """Intact frames whose payloads the fast path must refuse (or take), each giving what the
    per-record decoder gives."""
    compiled_kernel()
    assert_paths_agree(data)


def test_a_bad_crc_drops_the_same_records_on_both_paths() -> None:
    compiled_kernel()
    good = b"".join(record(e) for e in [b"\x09" + bytes(8)] * 40)
    for at in (3, 8, 12, 20, len(good) - 1):  # length, header CRC, data, data CRC
        damaged = bytearray(good)
        damaged[at] ^= 0x40
        assert_paths_agree(bytes(damaged))


def test_the_kernel_refuses_to_read_outside_its_buffer() -> None:
    compiled = compiled_kernel()
    buf = bytearray(64)
    i64 = np.array
    with pytest.raises(ValueError):
        compiled.crc_ok(buf, i64([60], np.int64), i64([8], np.int64))  # past the padding
    with pytest.raises(ValueError):
        compiled.crc_ok(buf, i64([-1], np.int64), i64([1], np.int64))
    with pytest.raises(ValueError):
        compiled.crc_ok(buf, i64([0, 1], np.int64), i64([1], np.int64))
    with pytest.raises(ValueError):
        compiled.crc_ok(buf, i64([0], np.int32), i64([1], np.int64))  # not int64 data
    with pytest.raises(ValueError):
        compiled.chain(buf, 0, 65)
    long = bytearray(64)
    long[0] = 40  # a length reaching into the padding
    for heads in ([-1], [37], [0]):
        with pytest.raises(ValueError, match="outside"):
            compiled.records(long, i64(heads, np.int64))
    assert compiled.records(bytearray(64), i64([], np.int64)) == (bytearray(), bytearray(), [])
    one, two = i64([12], np.int64), i64([12, 40], np.int64)
    with pytest.raises(ValueError, match="different lengths"):
        compiled.tiles(one, two, 64, i64([], np.int64), one, one)
    with pytest.raises(ValueError, match="different lengths"):
        compiled.tiles(one, one, 64, i64([], np.int64), one, two)
    keys = bytes(8)
    with pytest.raises(ValueError):
        compiled.scalars(buf, i64([40], np.int64), i64([20], np.int64), keys, b"", b"", b"", 96)
    with pytest.raises(ValueError):
        compiled.scalars(bytearray(8), i64([], np.int64), i64([], np.int64), keys, b"", b"", b"", 9)
    assert compiled.chain(buf, 70, 64) == (bytearray(), 70)  # nothing to follow


def test_distmon_pure_forces_the_reference_path() -> None:
    probe = "from distcore.tfrecord import kernel; print(kernel.ACTIVE is None)"
    env = {**os.environ, "DISTMON_PURE": "1"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    assert out.strip() == "True"


def test_a_kernel_built_from_older_sources_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """One without a function the decoder calls (not rebuilt since): the reference reads
    instead."""
    import importlib
    import types

    built = compiled_kernel()
    assert all(hasattr(built, name) for name in kernel.FUNCTIONS)
    old = types.ModuleType("distcore.tfrecord._kernel")
    old.chain = built.chain  # type: ignore[attr-defined]
    monkeypatch.setattr(importlib, "import_module", lambda name: old)
    assert kernel._load() is None


def test_setup_builds_every_kernel_source() -> None:
    """setup.py lists each _kernel*.c of the package: a file left out builds a module that
    fails to import (undefined kernel_* symbols), and then the reference path reads, slower."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    tree = ast.parse((root / "setup.py").read_text())
    listed = next(
        ast.literal_eval(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "SOURCES" for t in node.targets)
    )
    package = root / "shared" / "distcore" / "tfrecord"
    assert sorted(listed) == sorted(p.name for p in package.glob("_kernel*.c"))
    assert (package / "_kernel.h").is_file()


def test_the_built_kernel_exports_only_its_init() -> None:
    """The seven sources share `kernel_*` helpers, hidden from the dynamic symbol table: a name
    exported from one extension can bind to another extension's same-named symbol."""
    import shutil

    compiled = kernel.ACTIVE
    nm = shutil.which("nm")
    if compiled is None or nm is None:
        pytest.skip("needs the built kernel and nm (binutils; `pip install -e .` builds it)")
    assert compiled.__file__ is not None  # an extension module is always loaded from a file
    listing = subprocess.run([nm, "-D", "--defined-only", compiled.__file__],
                             capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in listing.splitlines()
                if line.split() and line.split()[-2] in {"T", "D", "B", "R"}}
    assert exported == {"PyInit__kernel"}
