"""The watcher's pure rooms: the mode (fstype.choose_mode) and the plan of a first read
(first_read: head start, newest first, turns, notices, the wait for the draw)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from distcore.events import first_read
from distcore.events.discovery import Found, RunDir
from distcore.events.fstype import choose_mode


@pytest.mark.parametrize(
    ("poll", "kinds", "mode", "said"),
    [
        (True, {"/a": "ext4"}, "poll", "polling as asked (--poll)"),
        (False, {"/a": "ext4"}, "inotify", "inotify through watchdog"),
        (False, {"/a": None}, "inotify", "inotify through watchdog"),  # not Linux: unknown
        (False, {"/a": "ext4", "/b": "fuse.sshfs"}, "poll",
         "/b is on fuse.sshfs, where inotify sees no remote changes"),
        (False, {"/a": "nfs4", "/b": "cifs"}, "poll",
         "/a is on nfs4, where inotify sees no remote changes"),  # the first that needs it
    ],
)  # fmt: skip
def test_choose_mode(poll: bool, kinds: dict[str, str | None], mode: str, said: str) -> None:
    roots = [Path(r) for r in kinds]
    assert choose_mode(roots, poll, lambda root: kinds[str(root)]) == (mode, said)


def _found(name: str, mtime: float) -> Found:
    return Found(name, f"/logs/{name}", ("events.out.tfevents.1.h",), mtime, "/")


@pytest.mark.parametrize(
    ("mtimes", "head"),
    [
        ([1.0, 2.0, 3.0], None),  # no more than FIRST_RUNS: no head start
        ([1.0, 3.0, 2.0, 5.0], ["r3", "r1"]),
        ([2.0, 2.0, 1.0, 0.0], ["r0", "r1"]),  # ties in the walk's order, as sorted() keeps
    ],
)
def test_head_start_is_the_walks_newest(
    monkeypatch: pytest.MonkeyPatch, mtimes: list[float], head: list[str] | None
) -> None:
    monkeypatch.setattr(first_read, "FIRST_RUNS", 3 if head is None else 2)
    walked = [_found(f"r{i}", m) for i, m in enumerate(mtimes)]
    newest = first_read.head_start(walked)
    assert (None if newest is None else [w.name for w in newest]) == head


def test_newest_first_looks_up_what_the_walk_did_not_find(tmp_path: Path) -> None:
    runs = []
    for name, mtime in (("old", 100.0), ("new", 300.0), ("empty", None)):
        files: tuple[Path, ...] = ()
        if mtime is not None:
            path = tmp_path / name / "events.out.tfevents.1.h"
            path.parent.mkdir()
            path.write_bytes(b"")
            os.utime(path, (mtime, mtime))
            files = (path, tmp_path / name / "events.out.tfevents.2.gone")  # gone: skipped
        runs.append(RunDir(name, tmp_path / name, files))
    ordered, mtimes = first_read.newest_first(runs, {"old": 200.0})  # the walk's, kept
    assert [r.name for r in ordered] == ["new", "old", "empty"]
    assert mtimes == {"old": 200.0, "new": 300.0, "empty": None}


def test_read_in_turn_reads_the_head_alone_then_deals_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(first_read, "FIRST_RUNS", 2)
    runs = [RunDir(f"r{i}", Path(f"/logs/r{i}"), ()) for i in range(7)]
    lock, events = threading.Lock(), list[list[str] | str]()

    def read(part: list[RunDir]) -> list[str]:
        with lock:
            events.append([r.name for r in part])
        return [r.name for r in part]

    done = first_read.read_in_turn(runs, read, 2, lambda: events.append("between"))
    assert events[:2] == [["r0", "r1"], "between"]
    assert sorted(events[2:]) == [["r2", "r4", "r6"], ["r3", "r5"]]  # a share per thread
    assert done == [["r0", "r1"], ["r2", "r4", "r6"], ["r3", "r5"]]
    assert first_read.read_in_turn(runs[:1], read, 4, lambda: None) == [["r0"]]


def test_landed_tells_the_first_at_once_and_the_rest_when_flushed() -> None:
    told: list[frozenset[str]] = []
    landed = first_read.Landed(told.append, total=3)
    landed.NOTIFY_SECONDS = 3600.0  # the next notices wait for flush()
    for name in ("a", "b", "c"):
        landed.add(name)
    assert told == [{"a"}] and (landed.count, landed.total) == (3, 3)
    landed.flush()
    landed.flush()  # nothing new: nothing told
    assert told == [{"a"}, {"b", "c"}]


@pytest.mark.parametrize("which", ["drawn", "stop", "neither"])
def test_the_wait_for_the_draw_ends_on_the_draw_a_close_or_its_bound(
    monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    monkeypatch.setattr(first_read, "FIRST_DRAW_WAIT", 120.0 if which != "neither" else 0.01)
    drawn, stop = threading.Event(), threading.Event()
    {"drawn": drawn, "stop": stop}.get(which, threading.Event()).set()
    waiter = threading.Thread(target=first_read.wait_for_draw, args=(drawn, stop))
    waiter.start()
    waiter.join(60)  # bounds a failure only
    assert not waiter.is_alive()
