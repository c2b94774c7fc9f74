"""Fresh runs of small files are read in batches (many.py): exactly what reading each alone gives.

Whatever the files hold (good records of every writer's shape, damage, partial last records,
empty files, several files per run, malformed records, hparams), a logdir read with batching
equals the same logdir read file by file, bit for bit, problems and offsets included; and a
watcher that goes on reading them after the batched first pass sees what a lone reader sees.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcore.events import LogdirWatcher, RunStore, many
from distcore.events.snapshots import RunSnapshot
from tests.core.test_events_wiretypes import mixed_file
from tests.core.wire_builder import event_file, run_file
from tests.kit.writers import scalar_records

# Each test once on the compiled kernel and once on the reference (tests/core/conftest.py).
pytestmark = pytest.mark.usefixtures("decoder_path")


def _bits(values: object) -> list[int]:
    return np.asarray(values, dtype=np.float64).view(np.int64).tolist()


def _key(runs: tuple[RunSnapshot, ...]) -> list[object]:
    return [
        (
            r.name, r.files, r.problems, repr(dict(r.hparams)), repr(r.last_update),
            {
                t: (list(s.steps), _bits(s.values), _bits(s.wall_times), s.count, s.last_step,
                    repr(s.min), repr(s.max))
                for t, s in r.scalars.items()
            },
        )
        for r in runs
    ]


def _read(
    root: Path, batched: bool, monkeypatch: pytest.MonkeyPatch, batch_bytes: int | None = None
) -> RunStore:
    store = RunStore()
    with monkeypatch.context() as m:
        if not batched:
            m.setattr(many, "SMALL_FILE", -1)  # no file is small: every run read alone
        if batch_bytes is not None:  # small groups: each reads into the last one's buffer
            m.setattr(many, "BATCH_BYTES", batch_bytes)
        watcher = LogdirWatcher([root], store, poll=True)
        watcher.scan_once()
    return store


def _write_logdir(root: Path, runs: list[list[bytes]]) -> None:
    for i, files in enumerate(runs):
        (root / f"run{i}").mkdir()
        for j, data in enumerate(files):
            (root / f"run{i}" / f"events.out.tfevents.{100 + j}.host").write_bytes(data)


_FILE = (
    event_file() | run_file() | mixed_file().map(lambda case: case[0])
    | st.binary(max_size=200) | st.just(b"")
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(runs=st.lists(st.lists(_FILE, min_size=1, max_size=3), min_size=2, max_size=6))
def test_batched_reads_equal_lone_reads(
    runs: list[list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write_logdir(root, runs)
        batched = _read(root, True, monkeypatch).snapshot()
        alone = _read(root, False, monkeypatch).snapshot()
        assert _key(batched) == _key(alone)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(runs=st.lists(st.lists(_FILE, min_size=1, max_size=3), min_size=2, max_size=8),
       batch_bytes=st.sampled_from([1, 64, 300]))
def test_groups_that_reuse_one_buffer_equal_lone_reads(
    runs: list[list[bytes]], batch_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group reads into the bytes the last one left there (a longer group's, a run given
    up half-read): none of them reaches the next group's decode."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write_logdir(root, runs)
        batched = _read(root, True, monkeypatch, batch_bytes).snapshot()
        alone = _read(root, False, monkeypatch).snapshot()
        assert _key(batched) == _key(alone)


def test_a_run_given_up_half_read_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its small file is read into the buffer, then its big one refuses the run: the next
    run's bytes take their place, and the first run is read alone, whole."""
    big = scalar_records("loss", [(s, float(s)) for s in range(30_000)])  # over SMALL_FILE
    small = scalar_records("acc", [(1, 1.0), (2, 2.0)])
    _write_logdir(tmp_path, [[small, big], [scalar_records("acc", [(3, 0.5)])]])
    batched = _read(tmp_path, True, monkeypatch).snapshot()
    assert _key(batched) == _key(_read(tmp_path, False, monkeypatch).snapshot())
    runs = {r.name: r for r in batched}
    assert runs["run0"].scalars["loss"].count == 30_000 and runs["run0"].scalars["acc"].count == 2
    assert runs["run1"].scalars["acc"].count == 1
    assert not runs["run0"].problems and not runs["run1"].problems


def test_what_is_appended_after_a_batched_read_is_read_on(tmp_path: Path) -> None:
    _write_logdir(tmp_path, [[scalar_records("loss", [(s, 1.0) for s in range(5)])]
                             for _ in range(3)])
    store = RunStore()
    watcher = LogdirWatcher([tmp_path], store, poll=True)
    watcher.scan_once()
    path = next((tmp_path / "run1").iterdir())
    with path.open("ab") as f:
        f.write(scalar_records("loss", [(5, 2.0), (6, 3.0)]))
    watcher.scan_once()
    run = store.get("run1")
    assert run is not None and list(run.scalars["loss"].steps) == list(range(7))
    assert run.scalars["loss"].values[-2:] == (2.0, 3.0)
    # Rewritten in place (same inode, new bytes): read afresh, as after a lone read.
    path.write_bytes(scalar_records("loss", [(0, 9.0)]) + bytes(path.stat().st_size - 44))
    watcher.scan_once()
    run = store.get("run1")
    assert run is not None and list(run.scalars["loss"].steps) == [0]


def test_large_and_odd_files_are_left_to_the_lone_reader(tmp_path: Path) -> None:
    big = scalar_records("loss", [(s, float(s)) for s in range(30_000)])  # over SMALL_FILE
    assert len(big) > many.SMALL_FILE
    _write_logdir(tmp_path, [[big], [scalar_records("loss", [(1, 1.0)])], [b"\x00" * 50]])
    store = RunStore()
    LogdirWatcher([tmp_path], store, poll=True).scan_once()
    runs = {r.name: r for r in store.snapshot()}
    assert runs["run0"].scalars["loss"].count == 30_000
    assert runs["run1"].scalars["loss"].count == 1
    assert "loss" not in runs["run2"].scalars
