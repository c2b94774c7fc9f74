"""The reader on hostile and damaged logdirs: names as bytes, extreme numbers, lying lengths,
zero-filled and sparse files, files rewritten in place, unreadable paths, failing listeners."""

from __future__ import annotations

import json
import os
import struct
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distcore.tfrecord.wire as s
from distcore.events import LogdirWatcher, RunStore, load_once
from distcore.events.jsonify import run_to_json
from distcore.events.reader import CHUNK, FileState, read_new
from distcore.tfrecord import Batch
from distcore.tfrecord.framing import (
    LENGTH_PAST_END,
    LENGTH_TOO_LARGE,
    MAX_RECORD,
    ZERO_BYTES,
)
from tests.core.events_helpers import only_run, steps_values
from tests.core.wire_builder import event_file, field, run_file
from tests.kit.wait import wait_until
from tests.kit.writers import header, record, scalar_records, varint

EVENT_FILE = "events.out.tfevents.1.host"


def _raw_scalar(tag: bytes, step: int, value: float, wall: float = 1000.0) -> bytes:
    """A tensorboardX-shaped event whose tag may be any bytes."""
    val = field(s.K_TAG, tag) + bytes([s.K_SIMPLE]) + struct.pack("<f", value)
    summary = field(s.K_SUMMARY, field(s.K_VALUE, val))
    return bytes([s.K_WALL]) + struct.pack("<d", wall) + bytes([s.K_STEP]) + varint(step) + summary


def _write(directory: Path, data: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / EVENT_FILE
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("long", [False, True], ids=["fast path", "general decoder"])
def test_tags_differing_only_in_undecodable_bytes_stay_two_tags(tmp_path: Path, long: bool) -> None:
    pad = b"x" * 120 if long else b""  # past the fast path's tag limit
    a, b = pad + b"a\xffb", pad + b"a\xfeb"
    data = b"".join(record(_raw_scalar(a, i, float(i))) for i in range(5))
    data += b"".join(record(_raw_scalar(b, i, -float(i))) for i in range(3))
    data += record(_raw_scalar(b"loss", 0, 7.0))
    _write(tmp_path, data)
    run = only_run(tmp_path)
    tag_a, tag_b = (t.decode("utf-8", "surrogateescape") for t in (a, b))
    assert set(run.scalars) == {tag_a, tag_b, "loss"}
    assert steps_values(run, tag_a) == [(i, float(i)) for i in range(5)]
    assert steps_values(run, tag_b) == [(i, -float(i)) for i in range(3)]
    assert steps_values(run, "loss") == [(0, 7.0)]
    names = set(run_to_json(run)["scalars"])
    assert len(names) == 3 and all(n.isascii() or "\udcff" not in n for n in names)


def test_fast_and_slow_records_of_many_tags_keep_their_own_values(tmp_path: Path) -> None:
    # Tags decoded by both paths in one read, several of them invalid UTF-8.
    tags = [b"\xff", b"\xfe", b"\xff\xfe", b"z" * 100 + b"\xff", b"z" * 100 + b"\xfe", b"ok"]
    data = b"".join(
        record(_raw_scalar(tag, step, float(10 * k + step)))
        for step in range(4) for k, tag in enumerate(tags)
    )
    _write(tmp_path, data)
    run = only_run(tmp_path)
    for k, tag in enumerate(tags):
        name = tag.decode("utf-8", "surrogateescape")
        assert steps_values(run, name) == [(step, float(10 * k + step)) for step in range(4)]


@pytest.mark.parametrize(
    "points",
    [
        [(2**63 - 1, 1.0)],
        [(-(2**63), 1.0), (2**63 - 1, 2.0)],
        [(5, 1.0)] * 50,
        [(-5, 1.0), (-3, 2.0), (-1, float("nan"))],
        [(i * 2**57, float(i)) for i in range(-60, 60)],
    ],
    ids=["max step", "both extremes", "all at one step", "negative", "huge spread"],
)
@pytest.mark.parametrize("wall", [float("nan"), float("inf"), -float("inf"), 1e300])
def test_extreme_numbers_never_raise_and_json_stays_valid(
    tmp_path: Path, points: list[tuple[int, float]], wall: float
) -> None:
    data = b"".join(record(_raw_scalar(b"x", step, v, wall)) for step, v in points)
    _write(tmp_path, data)
    for max_points in (4, 2000):
        (run,) = load_once([tmp_path], max_points=max_points)
        json.dumps(run_to_json(run), allow_nan=False)
        series = run.scalars["x"]
        assert series.last_step == points[-1][0]
        assert len(series.steps) <= max_points


def test_a_length_past_the_end_is_skipped_when_valid_records_follow(tmp_path: Path) -> None:
    good = scalar_records("loss", [(i, float(i)) for i in range(10)])
    for lie in (1 << 20, MAX_RECORD - 100, MAX_RECORD + 1, 1 << 40):
        path = _write(tmp_path, header(lie) + good)
        run = only_run(tmp_path)
        assert steps_values(run, "loss") == [(i, float(i)) for i in range(10)], lie
        assert any(LENGTH_PAST_END in p or LENGTH_TOO_LARGE in p for p in run.problems), lie
        path.unlink()


def test_a_lying_length_never_allocates_what_it_claims(tmp_path: Path) -> None:
    # A full chunk of good records, then a header claiming 200 MiB that the file does not hold.
    count = CHUNK // 30
    good = record(_raw_scalar(b"loss", 1, 1.0)) * count
    path = _write(tmp_path, good + header(200 << 20) + b"\1" * 1000)
    state, seen = FileState(path), list[Batch]()
    tracemalloc.start()
    read_new(state, {}, seen.append)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 << 20
    assert sum(len(seg.points["loss"][0]) for b in seen for seg in b.segments) == count


def test_the_last_record_being_written_is_waited_for(tmp_path: Path) -> None:
    whole = scalar_records("loss", [(i, 1.0) for i in range(3)])
    path = _write(tmp_path, whole[:-5])  # the last record is cut: "not yet", not a problem
    store = RunStore()
    watcher = LogdirWatcher([tmp_path], store)
    watcher.scan_once()
    assert only_run(tmp_path, store).scalars["loss"].count == 2
    with path.open("ab") as f:
        f.write(whole[-5:])
    watcher.scan_once()
    run = only_run(tmp_path, store)
    assert run.scalars["loss"].count == 3 and run.problems == ()


def test_a_sparse_hole_is_skipped_and_the_records_after_it_read(tmp_path: Path) -> None:
    before = scalar_records("loss", [(i, 1.0) for i in range(5)])
    after = scalar_records("loss", [(i, 2.0) for i in range(5, 10)])
    path = _write(tmp_path, before)
    with path.open("r+b") as f:
        f.truncate(len(before) + (64 << 20))  # a hole: no disk blocks, reads as zeros
        f.seek(0, os.SEEK_END)
        f.write(after)
    run = only_run(tmp_path)
    assert [s for s, _ in steps_values(run, "loss")] == list(range(10))
    assert any(ZERO_BYTES in p for p in run.problems)


def test_preallocated_zeros_at_the_end_are_waited_on_not_skipped(tmp_path: Path) -> None:
    first = scalar_records("loss", [(i, 1.0) for i in range(5)])
    then = scalar_records("loss", [(i, 2.0) for i in range(5, 10)])
    path = _write(tmp_path, first + bytes(4096))  # space reserved for what comes next
    store = RunStore()
    watcher = LogdirWatcher([tmp_path], store)
    watcher.scan_once()
    assert only_run(tmp_path, store).scalars["loss"].count == 5
    with path.open("r+b") as f:
        f.seek(len(first))
        f.write(then)
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    watcher.scan_once()
    run = only_run(tmp_path, store)
    assert [s for s, _ in steps_values(run, "loss")] == list(range(10))
    assert run.problems == ()


def test_a_file_rewritten_in_place_is_read_afresh(tmp_path: Path) -> None:
    path = _write(tmp_path, scalar_records("loss", [(i, 1.0) for i in range(20)]))
    inode = path.stat().st_ino
    store = RunStore()
    watcher = LogdirWatcher([tmp_path], store)
    watcher.scan_once()
    # Same inode, new content, longer than before: e.g. a job restarted into the same file.
    with path.open("r+b") as f:
        f.write(scalar_records("acc", [(i, 3.0) for i in range(30)]))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert path.stat().st_ino == inode
    watcher.scan_once()
    run = only_run(tmp_path, store)
    assert run.problems == ()
    assert steps_values(run, "acc") == [(i, 3.0) for i in range(30)]


def test_a_fifo_named_like_an_event_file_is_reported_and_never_opened(tmp_path: Path) -> None:
    _write(tmp_path / "good", scalar_records("loss", [(0, 1.0)]))
    (tmp_path / "bad").mkdir()
    os.mkfifo(tmp_path / "bad" / EVENT_FILE)
    (tmp_path / "loop").mkdir()
    os.symlink(tmp_path / "loop" / EVENT_FILE, tmp_path / "loop" / EVENT_FILE)
    store = RunStore()
    watcher = LogdirWatcher([tmp_path], store)
    done = threading.Event()

    def scan() -> None:
        watcher.scan_once()
        done.set()

    threading.Thread(target=scan, daemon=True).start()
    assert done.wait(10), "the scan blocked on a FIFO"
    assert [r.name for r in store.snapshot()] == ["good"]
    problems = watcher.problems()
    assert any("bad" in p and "not a regular file" in p for p in problems), problems
    assert any("loop" in p for p in problems), problems


@pytest.mark.skipif(os.geteuid() == 0,
                    reason="root reads whatever the permissions say (runs as a non-root user)")
def test_unreadable_files_and_directories_are_reported(tmp_path: Path) -> None:
    path = _write(tmp_path / "run", scalar_records("loss", [(0, 1.0)]))
    (tmp_path / "closed").mkdir()
    path.chmod(0)
    (tmp_path / "closed").chmod(0)
    try:
        store = RunStore()
        watcher = LogdirWatcher([tmp_path], store)
        watcher.scan_once()
        assert any("closed" in p for p in watcher.problems())
        assert any("cannot open" in p for p in only_run(tmp_path, store).problems)
    finally:
        (tmp_path / "closed").chmod(0o755)


def test_a_missing_root_is_a_problem_not_silence(tmp_path: Path) -> None:
    watcher = LogdirWatcher([tmp_path / "nowhere"], RunStore())
    watcher.scan_once()
    assert any("nowhere" in p for p in watcher.problems())


def test_the_watcher_outlives_a_failing_pass_and_says_so(tmp_path: Path) -> None:
    _write(tmp_path / "run", scalar_records("loss", [(0, 1.0)]))
    store = RunStore()
    failures = [3]

    def listener(changed: frozenset[str]) -> None:
        if failures[0] > 0:
            failures[0] -= 1
            raise RuntimeError("listener broke\nsecond line")

    store.subscribe(listener)
    watcher = LogdirWatcher([tmp_path], store, poll=True, poll_interval=0.05)
    watcher.start()
    try:
        wait_until(watcher.errors, "the listener's failure shown", every=0.01)
        (error,) = watcher.errors()
        assert error.producer == "watcher" and error.message == "RuntimeError: listener broke"
        path = tmp_path / "run" / EVENT_FILE
        with path.open("ab") as f:
            f.write(scalar_records("loss", [(1, 2.0)]))

        def recovered() -> bool:
            run = store.get("run")
            return run is not None and run.scalars["loss"].count == 2 and not watcher.errors()

        wait_until(recovered, "the new point read and the failure gone")
        assert store.get("run").scalars["loss"].count == 2  # type: ignore[union-attr]
        assert watcher.errors() == ()
    finally:
        watcher.close()


def test_a_length_past_the_end_in_mid_file_is_reported_once(tmp_path: Path) -> None:
    good = scalar_records("loss", [(i, float(i)) for i in range(10)])
    cut = len(scalar_records("loss", [(i, float(i)) for i in range(4)]))
    _write(tmp_path, good[:cut] + header(1 << 30) + good[cut:])
    run = only_run(tmp_path)
    assert [s for s, _ in steps_values(run, "loss")] == list(range(10))
    assert any(LENGTH_TOO_LARGE in p for p in run.problems), run.problems


def _hparams_record(entries: list[tuple[bytes, bytes]]) -> bytes:
    """An hparams session-start event whose names and string values are any bytes."""
    start = b"".join(
        field(0x0A, field(0x0A, name) + field(0x12, value)) for name, value in entries
    )  # SessionStartInfo.hparams: map entries (key = 1, value = 2)
    content = field(0x1A, start)  # HParamsPluginData.session_start_info = 3
    plugin = field(0x0A, b"hparams") + field(0x12, content)
    metadata = field(0x0A, plugin)  # SummaryMetadata.plugin_data = 1
    val = field(s.K_TAG, b"_hparams_/session_start_info") + field(s.K_METADATA, metadata)
    return bytes([s.K_WALL]) + struct.pack("<d", 1.0) + field(s.K_SUMMARY, field(s.K_VALUE, val))


def test_hparams_names_and_values_keep_their_bytes(tmp_path: Path) -> None:
    entries = [
        (b"lr\xff", b"\x11" + struct.pack("<d", 0.5)),  # number_value (fixed64, field 2)
        (b"lr\xfe", field(0x1A, b"adam\xfe")),  # string_value (field 3)
        (b"ok", b"\x20\x01"),  # bool_value (varint, field 4)
        (b"none", b"\x08\x00"),  # null_value
    ]
    _write(tmp_path, record(_hparams_record(entries)) + record(_raw_scalar(b"loss", 1, 1.0)))
    run = only_run(tmp_path)
    raw = [b"lr\xff", b"lr\xfe", b"adam\xfe"]
    lr_ff, lr_fe, adam = (b.decode("utf-8", "surrogateescape") for b in raw)
    assert dict(run.hparams) == {lr_ff: 0.5, lr_fe: adam, "ok": True, "none": None}
    hparams = run_to_json(run)["hparams"]
    assert hparams == {"lr\\xff": 0.5, "lr\\xfe": "adam\\xfe", "ok": True, "none": None}
    assert run.problems == ()


def test_run_directories_that_are_not_utf8(tmp_path: Path) -> None:
    name = os.fsdecode(b"run-\xff")
    _write(tmp_path / name, scalar_records("loss", [(0, 1.0)]))
    (run,) = load_once([tmp_path])
    assert run.name == name
    assert json.loads(json.dumps(run_to_json(run)))["name"] == "run-\\xff"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=3000) | event_file() | run_file(), min_size=1, max_size=3))
def test_any_bytes_in_a_logdir_read_and_jsonify(contents: list[bytes]) -> None:
    """Whatever the files hold: no exception, and valid JSON (no NaN, no lone surrogate)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i, data in enumerate(contents):
            _write(root / f"run{i}", data)
        for run in load_once([root]):
            json.dumps(run_to_json(run), allow_nan=False, ensure_ascii=False).encode()
