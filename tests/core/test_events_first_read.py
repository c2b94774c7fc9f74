"""A sweep's first read: its newest runs are read and told before the walk's other
runs are even made into Paths (10,000 runs' Paths were 0.15 s of CPU on the way to the
dashboard's first row); the read ends where a read without that head start ends. Real
tensorboardX files, the real watcher and store."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distcore.events import LogdirWatcher, RunStore, discovery, first_read, watch
from tests.kit.wait import wait_until
from tests.kit.writers import write_scalars

RUNS = 6


def _sweep(root: Path) -> None:
    now = time.time()
    for i in range(RUNS):
        write_scalars(root / f"run{i}", [1.0 / (step + i + 1) for step in range(3)], now - 100)
        then = now - 100 + i  # run5 is the newest
        for path in (root / f"run{i}").iterdir():
            os.utime(path, (then, then))


def _state(store: RunStore) -> list[tuple[Any, ...]]:
    return sorted(
        (r.name, r.status, r.files, r.problems, tuple(r.scalars["loss"].values))
        for r in store.snapshot()
    )


def test_the_newest_runs_are_told_before_the_others_are_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sweep(tmp_path)
    monkeypatch.setattr(first_read, "FIRST_RUNS", 2)
    monkeypatch.setattr(first_read.Landed, "NOTIFY_SECONDS", 0.0)
    made: list[str] = []
    run = discovery.Found.run

    def run_made(self: discovery.Found) -> discovery.RunDir:
        made.append(self.name)
        return run(self)

    monkeypatch.setattr(discovery.Found, "run", run_made)
    store = RunStore()
    drawn = threading.Event()
    drawn.set()
    watcher = LogdirWatcher([tmp_path], store, workers=1, first_drawn=drawn)
    first: list[tuple[frozenset[str], list[str], tuple[int, int] | None]] = []

    def tell_first(names: frozenset[str]) -> None:
        if not first:
            first.append((names, list(made), watcher.progress()))

    store.subscribe(tell_first)
    watcher.scan_once()
    names, made_then, progress = first[0]
    assert names and names <= {"run5", "run4"}
    assert sorted(made_then) == ["run4", "run5"]  # the other four: not yet
    assert progress is not None and progress[1] == RUNS  # the whole read's progress
    assert watcher.progress() is None
    assert len(_state(store)) == RUNS
    assert watcher.scan_once() == frozenset()  # nothing left unread


def test_a_head_start_reads_what_a_read_without_one_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sweep(tmp_path)
    plain = RunStore()
    LogdirWatcher([tmp_path], plain, workers=2).scan_once()  # 6 runs: FIRST_RUNS covers them
    monkeypatch.setattr(first_read, "FIRST_RUNS", 2)
    headed = RunStore()
    drawn = threading.Event()
    drawn.set()
    LogdirWatcher([tmp_path], headed, workers=2, first_drawn=drawn).scan_once()
    assert _state(headed) == _state(plain)
    assert {r.name for r in headed.snapshot()} == {f"run{i}" for i in range(RUNS)}


def test_with_no_front_end_no_mtime_is_looked_up_before_the_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--once` and `--serve` draw no first rows: a sweep's first read takes the runs as the
    walk found them, each file's mtime from the fstat its read makes anyway (a stat of each
    of 100,000 event files first was a share of the whole read), and ends as the ordered one."""
    _sweep(tmp_path)
    monkeypatch.setattr(first_read, "FIRST_RUNS", 2)
    drawn = threading.Event()
    drawn.set()
    ordered = RunStore()
    LogdirWatcher([tmp_path], ordered, workers=2, first_drawn=drawn).scan_once()

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("an mtime looked up before the read")

    monkeypatch.setattr(first_read, "newest_first", refused)
    monkeypatch.setattr(first_read, "_newest_mtime", refused)
    monkeypatch.setattr(os.DirEntry, "stat", refused, raising=False)
    store = RunStore()
    LogdirWatcher([tmp_path], store, workers=2).scan_once()
    assert _state(store) == _state(ordered)


@contextlib.contextmanager
def scan_till_drawn(root: Path) -> Iterator[tuple[RunStore, LogdirWatcher, threading.Thread]]:
    """A first scan in a thread of its own, which the front end's first draw lets go on: drawn,
    and the scan given time to end, on leaving."""
    drawn = threading.Event()
    store = RunStore()
    watcher = LogdirWatcher([root], store, workers=2, first_drawn=drawn)
    scan = threading.Thread(target=watcher.scan_once)
    scan.start()
    try:
        yield store, watcher, scan
    finally:
        drawn.set()
        scan.join(60)


def test_the_rest_is_read_once_the_first_rows_are_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rest's reader threads would take the GIL that the front end's first draw needs."""
    _sweep(tmp_path)
    monkeypatch.setattr(first_read, "FIRST_RUNS", 2)
    monkeypatch.setattr(first_read, "FIRST_DRAW_WAIT", 120.0)  # only the draw ends the wait here
    with scan_till_drawn(tmp_path) as (store, _, scan):
        wait_until(lambda: len(store.snapshot()) >= 2, "the newest runs", every=0.01)
        scan.join(0.2)
        assert scan.is_alive() and {r.name for r in store.snapshot()} == {"run5", "run4"}
    assert not scan.is_alive() and len(store.snapshot()) == RUNS


def test_a_front_end_that_never_draws_holds_the_read_back_a_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sweep(tmp_path)
    monkeypatch.setattr(first_read, "FIRST_RUNS", 2)
    monkeypatch.setattr(first_read, "FIRST_DRAW_WAIT", 0.05)
    store = RunStore()
    LogdirWatcher([tmp_path], store, first_drawn=threading.Event()).scan_once()
    assert len(store.snapshot()) == RUNS


def test_the_read_waits_for_a_draw_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep's first read tells its newest runs twice (its head start, then the rest's own
    newest): only the first waits for the draw."""
    _sweep(tmp_path)
    monkeypatch.setattr(first_read, "FIRST_RUNS", 2)
    waits: list[bool] = []
    wait = watch.LogdirWatcher._wait_for_the_draw

    def counted(self: watch.LogdirWatcher) -> None:
        waits.append(self._first_drawn is not None)
        wait(self)

    monkeypatch.setattr(watch.LogdirWatcher, "_wait_for_the_draw", counted)
    drawn = threading.Event()
    drawn.set()
    LogdirWatcher([tmp_path], RunStore(), first_drawn=drawn).scan_once()
    assert waits[:1] == [True] and not any(waits[1:])


def test_a_long_walks_first_runs_are_told_before_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep of 100,000 runs takes seconds to walk: its first rows waited for all of it."""
    _sweep(tmp_path)
    plain = RunStore()
    LogdirWatcher([tmp_path], plain, workers=2).scan_once()
    monkeypatch.setattr(discovery, "TELL_EVERY", 1)
    monkeypatch.setattr(first_read, "FIRST_WALK_SECONDS", 0.0)  # every walk is long here
    monkeypatch.setattr(first_read, "FIRST_DRAW_WAIT", 120.0)  # holds the walk till drawn
    with scan_till_drawn(tmp_path) as (store, watcher, scan):
        wait_until(lambda: store.snapshot(), "the first runs told")
        scan.join(0.2)
        progress = watcher.progress()
        assert scan.is_alive() and progress is not None and progress[1] < RUNS  # mid-walk
    assert not scan.is_alive() and _state(store) == _state(plain)
    assert watcher.scan_once() == frozenset()  # nothing left unread
