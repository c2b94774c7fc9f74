"""run.json is looked at when the watcher says it was written, never for jobs without one by
turns: a sweep of 100,000 runs made thousands of failed stats a second while idle. The real
watcher (inotify and polling), the real index, files written on a real filesystem."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distcore.events import LogdirWatcher, RunStore
from distcore.jobs.index import JobIndex
from tests.core.test_jobs_incremental import age
from tests.kit.wait import wait_until
from tests.kit.writers import write_scalars

JOBS = 12


class Stats:
    """Every `stat` of a run.json in this process (os.stat, so Path.stat too), by path."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[str] = []
        real = os.stat

        def counted(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
            if isinstance(path, (str, os.PathLike)) and os.fspath(path).endswith("run.json"):
                self.seen.append(os.fspath(path))
            return real(path, *args, **kwargs)

        monkeypatch.setattr(os, "stat", counted)

    def absent(self) -> list[str]:
        """The run.json looked for that are not there."""
        return [p for p in self.seen if not os.path.lexists(p)]


@pytest.fixture(params=["inotify", "poll"])
def watched(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, JobIndex]]:
    """A sweep of idle jobs without run.json, its watcher and index running as the dashboard
    runs them (a first scan, then watching), refreshing often."""
    for i in range(JOBS):
        write_scalars(tmp_path / f"job{i:02d}", [1.0, 0.5], time.time() - 5000)
        age(tmp_path / f"job{i:02d}", 5000)
    store = RunStore()
    poll = request.param == "poll"
    watcher = LogdirWatcher([tmp_path], store, poll=poll, poll_interval=0.05, workers=1)
    index = JobIndex(store, interval=0.05, agent_files=watcher)
    watcher.scan_once()
    index.start()
    watcher.start()
    try:
        assert watcher.mode == request.param
        wait_until(lambda: (s := index.latest()) is not None and len(s.jobs) == JOBS)
        yield tmp_path, index
    finally:
        index.close()
        watcher.close()


def _statuses(index: JobIndex) -> dict[str, str]:
    snap = index.latest()
    return {j.name: j.status for j in snap.jobs} if snap is not None else {}


def test_a_run_json_written_later_is_seen_with_no_stat_of_absent_ones(
    watched: tuple[Path, JobIndex], monkeypatch: pytest.MonkeyPatch
) -> None:
    logdir, index = watched
    stats = Stats(monkeypatch)
    (logdir / "job07" / "run.json").write_text(json.dumps({"status": "finished"}))
    wait_until(lambda: _statuses(index)["job07"] == "finished")
    later = index.refreshes + 5
    wait_until(lambda: index.refreshes >= later)  # refreshes as time passes look at none
    assert stats.absent() == []
    assert set(stats.seen) <= {str(logdir / "job07" / "run.json")}


def test_a_run_json_replaced_and_removed_is_seen(watched: tuple[Path, JobIndex]) -> None:
    logdir, index = watched
    path = logdir / "job03" / "run.json"
    path.write_text(json.dumps({"status": "finished"}))
    wait_until(lambda: _statuses(index)["job03"] == "finished")
    new = path.with_name("run.json.tmp")  # as distagent writes it: a new file, renamed
    new.write_text(json.dumps({"status": "failed", "error": "diverged"}))
    os.replace(new, path)
    wait_until(lambda: _statuses(index)["job03"] == "failed")
    path.unlink()
    wait_until(lambda: _statuses(index)["job03"] == "idle")


def test_a_jobs_own_files_written_make_no_pass_over_every_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """watchdog tells of a folder's change beside every file written there: taken for a new
    folder, each run.json and heartbeat a live job wrote was a pass over every run."""
    from distcore.events import watch

    write_scalars(tmp_path / "job" / "train", [1.0, 0.5], time.time())
    store = RunStore()
    watcher = LogdirWatcher([tmp_path], store, rescan_interval=3600)  # no safety net here
    watcher.scan_once()
    passes: list[int] = []
    walk = watch.walk_runs

    def counted_walk(*a: Any, **k: Any) -> Any:
        passes.append(1)
        return walk(*a, **k)

    monkeypatch.setattr(watch, "walk_runs", counted_walk)
    watcher.start()
    try:
        assert watcher.mode == "inotify"
        for k in range(3):
            new = tmp_path / "job" / "run.json.tmp"
            new.write_text(json.dumps({"status": "running", "last_step": k}))
            os.replace(new, tmp_path / "job" / "run.json")
            (tmp_path / "job" / "heartbeat-worker-0.json").write_text(json.dumps({"step": k}))
        wait_until(lambda: tmp_path / "job" in watcher.agent_changes())
        first = next((tmp_path / "job" / "train").glob("events.out.tfevents.*"))
        new = first.with_name("copy.tmp")
        new.write_bytes(first.read_bytes())
        os.replace(new, first.with_name(f"{first.name}.2"))  # a new event file: a pass
        wait_until(lambda: (run := store.get("job/train")) is not None and run.files == 2)
        assert len(passes) == 1  # the new file's (told after theirs): theirs made none
    finally:
        watcher.close()


def test_a_live_files_appends_are_read_together_not_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live job logging every 5 steps appends to its events file dozens of times a second; a
    read of each append was most of what watching it cost."""
    from distcore.events import watch
    from tests.kit.writers import scalar_records

    run = tmp_path / "run"
    run.mkdir()
    path = run / "events.out.tfevents.1.host"
    path.write_bytes(scalar_records("loss", [(0, 1.0)]))
    store = RunStore()
    watcher = LogdirWatcher([tmp_path], store, rescan_interval=3600)
    watcher.scan_once()
    reads: list[Path] = []
    read_new = watch.read_new

    def counted_read(state: Any, *a: Any) -> Any:
        reads.append(state.path)
        return read_new(state, *a)

    monkeypatch.setattr(watch, "read_new", counted_read)
    watcher.start()
    try:
        began = time.monotonic()
        for step in range(1, 51):  # a writer's pace (not a wait for a state)
            with path.open("ab") as f:
                f.write(scalar_records("loss", [(step, 1.0 / step)]))
            time.sleep(0.01)
        wait_until(lambda: (snap := store.get("run")) is not None
                   and snap.scalars["loss"].last_step == 50)
        took = time.monotonic() - began
    finally:
        watcher.close()
    assert len(reads) <= took / watch._READ_EVERY + 2
