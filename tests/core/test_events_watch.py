"""Discovery, restarts across files, and the live watcher (inotify and polling)."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from watchdog.observers import Observer

from distcore.events import LogdirWatcher, RunStore, load_once
from distcore.events.fstype import fs_type_in, needs_polling, parse_mountinfo
from tests.core.events_helpers import only_run, steps_values
from tests.kit.wait import wait_until
from tests.kit.writers import record, scalar_records, session_start

EVENT_FILE = "events.out.tfevents.{}.host"


def _write(directory: Path, data: bytes, n: int = 1) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / EVENT_FILE.format(n)
    with path.open("ab") as f:
        f.write(data)
    return path


@pytest.fixture(params=["inotify", "poll"])
def watched(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Path, RunStore, LogdirWatcher]]:
    store = RunStore()
    watcher = LogdirWatcher(
        [tmp_path], store, poll=request.param == "poll", poll_interval=0.1, rescan_interval=30
    )
    watcher.start()
    assert watcher.mode == request.param
    yield tmp_path, store, watcher
    watcher.close()


def test_runs_are_named_by_their_path_below_the_root(tmp_path: Path) -> None:
    _write(tmp_path, scalar_records("a", [(0, 1.0)]))
    _write(tmp_path / "exp1" / "train", scalar_records("a", [(0, 1.0)]))
    _write(tmp_path / "exp1" / "validation", scalar_records("a", [(0, 1.0)]))
    (tmp_path / "exp1" / "loop").symlink_to(tmp_path / "exp1")  # must not loop
    (tmp_path / "not-a-run").mkdir()
    (tmp_path / "not-a-run" / "notes.txt").write_text("x")
    names = {r.name for r in load_once([tmp_path])}
    assert {".", "exp1/train", "exp1/validation"} <= names
    assert all(not n.startswith("exp1/loop/loop") for n in names)


def test_several_roots_prefix_run_names(tmp_path: Path) -> None:
    for root in ("alpha", "beta"):
        _write(tmp_path / root / "run", scalar_records("a", [(0, 1.0)]))
    _write(tmp_path / "beta", scalar_records("a", [(0, 1.0)]))
    runs = load_once([tmp_path / "alpha", tmp_path / "beta"])
    assert [r.name for r in runs] == ["alpha/run", "beta", "beta/run"]
    assert runs[0].path.local == (tmp_path / "alpha" / "run").absolute()


def test_two_writers_in_one_run(tmp_path: Path) -> None:
    from tensorboardX import SummaryWriter

    first = SummaryWriter(str(tmp_path), filename_suffix=".a")
    second = SummaryWriter(str(tmp_path), filename_suffix=".b")
    for step in range(5):
        first.add_scalar("loss", float(step), step)
        second.add_scalar("gpu/0/utilization", 10.0 * step, step)
    first.close()
    second.close()
    run = only_run(tmp_path)
    assert run.files == 2
    assert steps_values(run, "loss") == [(s, float(s)) for s in range(5)]
    assert steps_values(run, "gpu/0/utilization") == [(s, 10.0 * s) for s in range(5)]


def test_a_restart_at_a_lower_step_in_a_new_file(tmp_path: Path) -> None:
    _write(tmp_path, scalar_records("loss", [(s, 1.0) for s in range(10)]), n=1)
    _write(tmp_path, scalar_records("loss", [(s, 2.0) for s in range(6, 8)]), n=2)
    loss = only_run(tmp_path).scalars["loss"]
    assert list(loss.steps) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert loss.values[-2:] == (2.0, 2.0) and loss.count == 8


def test_session_start_purges_the_whole_run(tmp_path: Path) -> None:
    data = scalar_records("a", [(s, 1.0) for s in range(10)])
    data += scalar_records("b", [(s, 1.0) for s in range(10)])
    data += record(session_start(4)) + scalar_records("a", [(4, 5.0)])
    _write(tmp_path, data)
    run = only_run(tmp_path)
    assert run.scalars["a"].steps == (0, 1, 2, 3, 4) and run.scalars["a"].last_value == 5.0
    assert run.scalars["b"].steps == (0, 1, 2, 3) and run.scalars["b"].count == 4


def test_status_follows_file_age_with_an_injected_clock(tmp_path: Path) -> None:
    path = _write(tmp_path, scalar_records("a", [(0, 1.0)]))
    now = [path.stat().st_mtime + 10]
    store = RunStore(clock=lambda: now[0], live_seconds=60)
    LogdirWatcher([tmp_path], store).scan_once()
    assert only_run(tmp_path, store).status == "live"
    now[0] += 120
    assert only_run(tmp_path, store).status == "idle"


def _last_step(store: RunStore, run: str, tag: str) -> int | None:
    snap = store.get(run)
    series = snap.scalars.get(tag) if snap is not None else None
    return series.last_step if series is not None else None


def _status(store: RunStore, run: str) -> str | None:
    snap = store.get(run)
    return snap.status if snap is not None else None


def test_new_points_arrive_while_watching(watched: tuple[Path, RunStore, LogdirWatcher]) -> None:
    root, store, _ = watched
    seen: list[frozenset[str]] = []
    unsubscribe = store.subscribe(seen.append)
    _write(root / "run", scalar_records("loss", [(0, 1.0)]))
    assert wait_until(lambda: _last_step(store, "run", "loss") == 0)
    for step in range(1, 6):
        _write(root / "run", scalar_records("loss", [(step, 1.0 / step)]))
        assert wait_until(lambda s=step: _last_step(store, "run", "loss") == s)  # type: ignore[misc]
    assert any("run" in names for names in seen)
    unsubscribe()


def test_a_run_created_after_the_watch_began(watched: tuple[Path, RunStore, LogdirWatcher]) -> None:
    root, store, _ = watched
    _write(root / "first", scalar_records("a", [(0, 1.0)]))
    assert wait_until(lambda: store.get("first") is not None)
    _write(root / "later" / "deep", scalar_records("a", [(0, 2.0)]))
    assert wait_until(lambda: _last_step(store, "later/deep", "a") == 0)


def test_a_file_deleted_while_watched(watched: tuple[Path, RunStore, LogdirWatcher]) -> None:
    root, store, _ = watched
    path = _write(root / "run", scalar_records("a", [(0, 1.0)]))
    # Read, not only seen: a run is live from its file's mtime, before its point is read.
    assert wait_until(lambda: _last_step(store, "run", "a") == 0)
    assert _status(store, "run") == "live"
    path.unlink()
    assert wait_until(lambda: _status(store, "run") == "gone")
    assert _last_step(store, "run", "a") == 0  # what was read stays visible
    _write(root / "run", scalar_records("a", [(1, 3.0)]), n=2)
    assert wait_until(lambda: _status(store, "run") == "live")
    assert wait_until(lambda: _last_step(store, "run", "a") == 1)


def test_a_network_mount_is_polled(tmp_path: Path) -> None:
    store = RunStore()
    watcher = LogdirWatcher([tmp_path], store, fs_type=lambda _: "nfs4", poll_interval=0.1)
    assert watcher.mode == "poll" and "nfs4" in watcher.mode_reason
    watcher.start()
    try:
        assert not any(t.name.startswith("InotifyBuffer") for t in threading.enumerate())
        _write(tmp_path / "run", scalar_records("a", [(0, 1.0)]))
        assert wait_until(lambda: store.get("run") is not None)
    finally:
        watcher.close()


class _WatchLimitObserver(Observer):  # type: ignore[misc,valid-type]
    """A real observer whose inotify_add_watch fails as the kernel does at the watch limit."""

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, "inotify watch limit reached")


def test_inotify_failure_falls_back_to_polling(tmp_path: Path) -> None:
    store = RunStore()
    watcher = LogdirWatcher(
        [tmp_path], store, poll_interval=0.1, observer_factory=_WatchLimitObserver
    )
    assert watcher.mode == "inotify"
    watcher.start()
    try:
        assert watcher.mode == "poll" and "watch limit" in watcher.mode_reason
        _write(tmp_path / "run", scalar_records("a", [(0, 1.0)]))
        assert wait_until(lambda: _last_step(store, "run", "a") == 0)
    finally:
        watcher.close()


MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:40 / /mnt/data rw - nfs4 server:/export rw
41 22 0:41 / /mnt/my\\040share rw - cifs //host/share rw
42 22 0:42 / /home/u/remote rw,nosuid - fuse.sshfs u@host: rw
43 40 0:43 / /mnt/data/local rw - xfs /dev/sdb rw
"""


@pytest.mark.parametrize(
    ("path", "fstype", "poll"),
    [
        ("/home/u/runs", "ext4", False),
        ("/mnt/data/exp", "nfs4", True),
        ("/mnt/data", "nfs4", True),
        ("/mnt/datax", "ext4", False),
        ("/mnt/my share/runs", "cifs", True),
        ("/home/u/remote/logs", "fuse.sshfs", True),
        ("/mnt/data/local/x", "xfs", False),
    ],
)
def test_filesystem_type_from_mountinfo(path: str, fstype: str, poll: bool) -> None:
    found = fs_type_in(parse_mountinfo(MOUNTINFO), path)
    assert found == fstype
    assert needs_polling(found) is poll


@pytest.mark.parametrize("fstype", ["lustre", "gpfs", "smb3", "fuse", "fuse.s3fs", "nfs"])
def test_network_filesystems_need_polling(fstype: str) -> None:
    assert needs_polling(fstype)


def test_this_machines_tmp_is_typed(tmp_path: Path) -> None:
    from distcore.events.fstype import mount_fs_type

    if not os.path.exists("/proc/self/mountinfo"):
        pytest.skip("no /proc/self/mountinfo (runs on Linux with /proc mounted)")
    assert mount_fs_type(tmp_path)


def test_a_replaced_or_truncated_file_is_read_again(tmp_path: Path) -> None:
    path = _write(tmp_path, scalar_records("a", [(s, 1.0) for s in range(5)]))
    store = RunStore()
    watcher = LogdirWatcher([tmp_path], store)
    watcher.scan_once()
    fresh = tmp_path / "fresh.tmp"
    fresh.write_bytes(scalar_records("a", [(s, 2.0) for s in range(3)]))
    os.replace(fresh, path)  # a new inode under the same name
    watcher.scan_once()
    assert steps_values(only_run(tmp_path, store), "a") == [(0, 2.0), (1, 2.0), (2, 2.0)]
    path.write_bytes(scalar_records("a", [(0, 3.0)]))  # same inode, now shorter
    watcher.scan_once()
    run = only_run(tmp_path, store)
    assert steps_values(run, "a") == [(0, 3.0)] and run.scalars["a"].count == 1


def test_a_failing_pass_is_shown_and_retried_soon_with_inotify(tmp_path: Path) -> None:
    """The poll-mode case is in test_events_untrusted; with inotify the safety-net rescan is
    30 s away, so only the loop's backoff (0.5 s, 1 s, ...) can bring it back this soon."""
    _write(tmp_path / "run", scalar_records("loss", [(0, 1.0)]))
    store = RunStore()
    failures = [2]

    def listener(changed: frozenset[str]) -> None:
        if failures[0] > 0 and changed:
            failures[0] -= 1
            raise RuntimeError("listener broke")

    store.subscribe(listener)
    watcher = LogdirWatcher([tmp_path], store, rescan_interval=30)
    watcher.start()
    try:
        assert watcher.mode == "inotify"
        assert wait_until(lambda: bool(watcher.errors()))
        (error,) = watcher.errors()
        assert (error.producer, error.message) == ("watcher", "RuntimeError: listener broke")
        _write(tmp_path / "run", scalar_records("loss", [(1, 2.0)]))

        def recovered() -> bool:
            run = store.get("run")
            return run is not None and run.scalars["loss"].count == 2 and not watcher.errors()

        assert wait_until(recovered, timeout=25.0)  # well before the 30 s rescan
    finally:
        watcher.close()
