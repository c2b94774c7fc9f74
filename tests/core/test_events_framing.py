"""The record reader on damaged, partial and random input: it must never raise or loop."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import google_crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcore.events import RunStore, load_once
from distcore.events.watch import LogdirWatcher
from distcore.tfrecord import PADDING, kernel
from distcore.tfrecord.framing import BAD_DATA_CRC, BAD_LENGTH_CRC, frame, masked_crc
from tests.core.events_helpers import only_run, steps_values
from tests.kit.writers import record, scalar_records

EVENT_FILE = "events.out.tfevents.100.host"


def _frame(data: bytes) -> tuple[list[bytes], int, list[tuple[str, int]]]:
    """The records, end and problems framing finds: the same on the kernel (where it is
    built) and on the reference path."""
    raw = bytearray(data) + bytearray(PADDING)
    found = []
    for compiled in (kernel.ACTIVE, None):
        frames = frame(raw, np.frombuffer(raw, dtype=np.uint8), len(data), compiled)
        spans = zip(frames.starts.tolist(), frames.lengths.tolist(), strict=True)
        found.append(([bytes(raw[s : s + n]) for s, n in spans], frames.end, frames.problems))
    assert found[0] == found[1]
    return found[0]


def test_the_masked_crc_is_tfrecords() -> None:
    plain = google_crc32c.value(b"abc")
    assert masked_crc(b"abc") == ((plain >> 15 | plain << 17) + 0xA282EAD8) & 0xFFFFFFFF


def test_a_record_is_tfrecords_framing_by_an_independent_crc() -> None:
    """The tests write every record with distcore's `record`: its bytes, built here from
    google_crc32c alone, so a fault there cannot hide behind the reader agreeing with it."""

    def masked(data: bytes) -> int:
        plain = google_crc32c.value(data)
        return ((plain >> 15 | plain << 17) + 0xA282EAD8) & 0xFFFFFFFF

    for data in (b"", b"payload", bytes(range(256)) * 40):
        length = struct.pack("<Q", len(data))
        crcs = struct.pack("<I", masked(length)), struct.pack("<I", masked(data))
        assert record(data) == length + crcs[0] + data + crcs[1]


def test_intact_records_come_back_in_order() -> None:
    payloads = [b"a" * n for n in (0, 1, 30, 200, 5000)]
    found, end, problems = _frame(b"".join(record(p) for p in payloads))
    assert found == payloads
    assert end == sum(len(p) + 16 for p in payloads)
    assert problems == []


@pytest.mark.parametrize("cut", [1, 8, 11, 12, 13, 20, 28])
def test_a_truncated_last_record_is_not_yet(cut: int) -> None:
    whole = record(b"first") + record(b"second record")
    found, end, problems = _frame(whole[: len(record(b"first")) + cut])
    assert found == [b"first"]
    assert end == len(record(b"first"))
    assert problems == []


def test_a_bad_data_crc_drops_only_that_record() -> None:
    damaged = bytearray(record(b"one") + record(b"two") + record(b"three"))
    damaged[len(record(b"one")) + 12] ^= 0xFF  # first byte of "two"
    found, _, problems = _frame(bytes(damaged))
    assert found == [b"one", b"three"]
    assert problems == [(BAD_DATA_CRC, len(record(b"one")))]


def test_a_bad_length_crc_resyncs_at_the_next_header() -> None:
    damaged = bytearray(record(b"one") + record(b"two") + record(b"three"))
    damaged[len(record(b"one"))] ^= 0x40  # the length of "two"
    found, end, problems = _frame(bytes(damaged))
    assert found == [b"one", b"three"]
    assert end == len(damaged)
    assert problems == [(BAD_LENGTH_CRC, len(record(b"one")))]


def test_garbage_is_reported_and_skipped() -> None:
    garbage = os.urandom(10_000)
    found, end, problems = _frame(garbage)
    assert found == []
    assert problems and problems[0] == (BAD_LENGTH_CRC, 0)
    assert len(garbage) - 12 < end <= len(garbage)


@settings(max_examples=150, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=8),
    noise=st.binary(max_size=64),
    flips=st.lists(st.integers(min_value=0, max_value=4000), max_size=4),
    cut=st.integers(min_value=0, max_value=4000),
)
def test_random_damage_never_raises_and_terminates(
    payloads: list[bytes], noise: bytes, flips: list[int], cut: int
) -> None:
    data = bytearray(b"".join(record(p) for p in payloads) + noise)
    for flip in flips:
        if flip < len(data):
            data[flip] ^= 0x5A
    data = data[: min(cut, len(data))]
    found, end, _ = _frame(bytes(data))
    assert 0 <= end <= len(data)
    # Every record returned really is one of the written payloads, intact (CRC-checked).
    assert all(p in payloads for p in found)
    if not flips and not noise:
        assert found == [p for p in payloads][: len(found)]


def test_a_record_cut_in_half_is_completed_later(tmp_path: Path) -> None:
    path = tmp_path / EVENT_FILE
    data = scalar_records("loss", [(0, 1.0), (1, 0.5), (2, 0.25)])
    half = len(data) - 20
    path.write_bytes(data[:half])
    store = RunStore()
    watcher = LogdirWatcher([tmp_path], store)
    watcher.scan_once()
    assert steps_values(only_run(tmp_path, store), "loss") == [(0, 1.0), (1, 0.5)]
    with path.open("ab") as f:
        f.write(data[half:])
    watcher.scan_once()
    run = only_run(tmp_path, store)
    assert steps_values(run, "loss") == [(0, 1.0), (1, 0.5), (2, 0.25)]
    assert run.scalars["loss"].count == 3
    assert run.problems == ()


def test_a_corrupt_crc_in_the_middle_of_a_file(tmp_path: Path) -> None:
    data = bytearray(scalar_records("loss", [(s, float(s)) for s in range(10)]))
    size = len(record(b"")) + len(scalar_records("loss", [(0, 0.0)])) - 16
    data[5 * (size + 0) + 30] ^= 0x01  # inside the 6th record's data (records are equal-sized)
    (tmp_path / EVENT_FILE).write_bytes(bytes(data))
    run = only_run(tmp_path)
    assert [s for s, _ in steps_values(run, "loss")] == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    assert len(run.problems) == 1 and "bad data CRC" in run.problems[0]


def test_garbage_and_empty_files_named_like_event_files(tmp_path: Path) -> None:
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / EVENT_FILE).write_bytes(os.urandom(5000))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / EVENT_FILE).write_bytes(b"")
    runs = {r.name: r for r in load_once([tmp_path])}
    assert set(runs) == {"garbage", "empty"}
    assert runs["garbage"].scalars == {} and "bad length CRC" in runs["garbage"].problems[0]
    assert runs["empty"].scalars == {} and runs["empty"].problems == ()
    assert runs["empty"].files == 1


def test_payloads_that_hold_whole_records_do_not_confuse_the_framing() -> None:
    inner = record(b"inner") + record(b"x" * 40)
    payloads = [b"head", inner, record(inner), b"\0" * 64, b"tail"]
    found, end, problems = _frame(b"".join(record(p) for p in payloads))
    assert found == payloads and problems == []
    assert end == sum(len(p) + 16 for p in payloads)
