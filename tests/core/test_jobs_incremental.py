"""A refresh costs what changed (a sweep stays cheap): the store and the index keep what did
not change, and a first read is told as it lands. Real event files, the real watcher and store."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from distcore.events import LogdirWatcher, RunStore, first_read, many
from distcore.events.snapshots import RunSnapshot
from distcore.jobs import agent as agent_module
from distcore.jobs.index import JobIndex
from distcore.jobs.profiles import ProfileReader
from distcore.jobs.snapshots import AgentRecord, Job
from distcore.location import RunLocation
from distcore.profile import ProfileSummary
from tests.core.profile_files import space, training_steps, write
from tests.kit.wait import wait_until
from tests.kit.writers import write_scalars


def age(run_dir: Path, seconds: float) -> None:
    """Files last written `seconds` ago (a run idle since)."""
    then = time.time() - seconds
    for path in run_dir.iterdir():
        os.utime(path, (then, then))


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_store_hands_out_the_same_runs_while_they_do_not_change(tmp_path: Path) -> None:
    now = time.time()
    for name in ("a", "b", "c"):
        write_scalars(tmp_path / name, [1.0, 0.5], now - 1000)
    store = RunStore()
    watcher = LogdirWatcher([tmp_path], store)
    watcher.scan_once()
    first = store.snapshot()
    assert store.snapshot() is first  # nothing changed: the same tuple
    write_scalars(tmp_path / "b", [0.4, 0.3], now)  # a second file in b
    watcher.scan_once()
    second = {r.name: r for r in store.snapshot()}
    before = {r.name: r for r in first}
    assert second["a"] is before["a"] and second["c"] is before["c"]
    assert second["b"] is not before["b"] and second["b"].status == "live"


def test_a_live_run_turns_idle_as_the_clock_runs_and_back_when_it_goes_back(
    tmp_path: Path,
) -> None:
    write_scalars(tmp_path / "a", [1.0, 0.5], time.time())
    clock = Clock(time.time())
    store = RunStore(clock=clock)
    LogdirWatcher([tmp_path], store).scan_once()
    assert [r.status for r in store.snapshot()] == ["live"]
    clock.now += 1000  # no write: the clock alone
    assert [r.status for r in store.snapshot()] == ["idle"]
    clock.now -= 1000
    assert [r.status for r in store.snapshot()] == ["live"]


def test_ended_jobs_keep_their_judgement_and_running_ones_are_judged_again(
    tmp_path: Path,
) -> None:
    start = time.time() - 5000
    write_scalars(tmp_path / "old" / "train", [1.0 / (1 + i) for i in range(60)], start)
    write_scalars(tmp_path / "running" / "train", [1.0 / (1 + i) for i in range(60)], start)
    (tmp_path / "running" / "run.json").write_text(json.dumps({"status": "running"}))
    clock = Clock(time.time())
    store = RunStore(clock=clock)
    LogdirWatcher([tmp_path], store).scan_once()
    index = JobIndex(store, clock=clock)
    first = {j.name: j for j in index.refresh().jobs}  # type: ignore[union-attr]
    clock.now += 5
    snap = index.refresh()
    assert snap is not None
    second = {j.name: j for j in snap.jobs}
    assert second["old"] is first["old"]  # silent for long: nothing can change it
    assert second["running"] is not first["running"]  # its stall grows with the clock
    gaps = [[a.message for a in j.alerts if a.kind == "run_stalled"]
            for j in (first["running"], second["running"])]  # fmt: skip
    assert gaps[0] and gaps[1] and gaps[0] != gaps[1]
    assert [a.run for a in snap.alerts if a.kind == "run_stalled"] == ["running/train"]


def test_the_jobs_tuple_stays_while_no_job_changed(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write_scalars(tmp_path / name, [1.0, 0.5, 0.2], time.time() - 5000)
    store = RunStore()
    LogdirWatcher([tmp_path], store).scan_once()
    index = JobIndex(store)
    first, second = index.refresh(), index.refresh()
    assert first is not None and second is not None
    assert second.jobs is first.jobs and [j.name for j in second.jobs] == ["a", "b"]


def test_a_run_json_written_later_is_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dormant jobs without run.json are looked at a share at a time, all after wake()."""
    monkeypatch.setattr(agent_module, "AGENT_CHECK_MIN", 1)
    monkeypatch.setattr(agent_module, "AGENT_CHECK_SHARE", 2)
    names = [f"job{i}" for i in range(4)]
    for name in names:
        write_scalars(tmp_path / name, [1.0, 0.5], time.time() - 5000)
        age(tmp_path / name, 5000)  # idle: not looked at every refresh
    store = RunStore()
    LogdirWatcher([tmp_path], store).scan_once()
    index = JobIndex(store)
    index.refresh()
    for name in ("job0", "job2"):  # one in each share
        (tmp_path / name / "run.json").write_text(json.dumps({"status": "finished"}))
    seen = []
    for _ in range(2):  # two refreshes of two jobs each: every job once
        snap = index.refresh()
        assert snap is not None
        seen.append({j.name: j.status for j in snap.jobs})
    assert seen[0] != seen[1]  # a share at a time
    assert seen[-1] == {"job0": "finished", "job1": "idle", "job2": "finished", "job3": "idle"}
    (tmp_path / "job3" / "run.json").write_text(json.dumps({"status": "failed"}))
    index.wake()
    snap = index.refresh()
    assert snap is not None and {j.name: j.status for j in snap.jobs}["job3"] == "failed"


def test_a_first_read_is_told_newest_first_as_it_lands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(many, "BATCH_BYTES", 1)  # one run a batch
    monkeypatch.setattr(first_read.Landed, "NOTIFY_SECONDS", 0.0)
    now = time.time()
    for i in range(5):
        write_scalars(tmp_path / f"run{i}", [1.0, 0.5], now - 100)
        age(tmp_path / f"run{i}", 100 - i)  # run4 is the newest
    store = RunStore()
    told: list[frozenset[str]] = []
    store.subscribe(told.append)
    drawn = threading.Event()  # a front end that shows rows as they land, and drew the first
    drawn.set()
    LogdirWatcher([tmp_path], store, workers=1, first_drawn=drawn).scan_once()
    assert len(told) > 1  # while reading, then the scan's own notification
    assert told[0] == {"run4"}
    assert frozenset().union(*told) == {f"run{i}" for i in range(5)}


def test_our_own_reads_queue_no_inotify_events(tmp_path: Path) -> None:
    """A pass over 10,000 runs once overflowed the kernel's queue with the opens and closes of
    its own reads; inotify is asked for writes only."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler

    for i in range(3):
        write_scalars(tmp_path / f"run{i}", [1.0, 0.5], time.time())
    seen: list[tuple[str, str]] = []

    class Recorder(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            seen.append((event.event_type, os.fsdecode(event.src_path)))

    watcher = LogdirWatcher([tmp_path], RunStore())
    watcher.start()
    try:
        assert watcher.mode == "inotify"
        observer = watcher._observer
        observer.add_handler_for_watch(Recorder(), next(iter(observer.emitters)).watch)
        files = sorted(tmp_path.glob("run*/events.out.tfevents.*"))
        for path in files:
            path.read_bytes()  # as a pass reads them
        with files[0].open("ab") as f:
            f.write(b"x")  # a write: the one event that must come (after any of the reads')
        wait_until(lambda: any(p == str(files[0]) for _, p in seen), "the write's event", 15)
    finally:
        watcher.close()
    assert any(p == str(files[0]) for _, p in seen)
    assert {kind for kind, _ in seen} <= {"modified", "closed", "created"}


def test_a_first_read_sets_each_runs_status_as_it_lands_and_ends_changing_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Set at the end of the read, every run's files and status changed at once: the index
    judged all 10,000 jobs again and the table updated every row, after all were listed."""
    monkeypatch.setattr(many, "BATCH_BYTES", 1)  # one run a batch
    monkeypatch.setattr(first_read.Landed, "NOTIFY_SECONDS", 0.0)
    for i in range(6):
        write_scalars(tmp_path / f"run{i}", [1.0, 0.5], time.time() - 5000)
        age(tmp_path / f"run{i}", 5000 - i)
    store = RunStore()
    watcher = LogdirWatcher([tmp_path], store, workers=2)
    first: dict[str, object] = {}
    progress: list[tuple[int, int] | None] = []

    def told(names: frozenset[str]) -> None:
        progress.append(watcher.progress())
        for run in store.snapshot():
            first.setdefault(run.name, run)

    store.subscribe(told)
    watcher.scan_once()
    final = store.snapshot()
    assert [(r.status, r.files) for r in final] == [("idle", 1)] * 6
    assert all(first[r.name] is r for r in final)  # as it landed: the end changed nothing
    assert progress[0] is not None and progress[0][1] == 6 and watcher.progress() is None


def test_many_live_jobs_are_not_each_looked_at_every_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep just written is 10,000 live jobs: a stat of each one's run.json every second
    was most of the dashboard's idle CPU. While few are live, each is looked at always."""
    monkeypatch.setattr(agent_module, "AGENT_CHECK_MIN", 2)
    monkeypatch.setattr(agent_module, "AGENT_CHECK_SHARE", 2)
    for i in range(6):
        write_scalars(tmp_path / f"job{i}", [1.0, 0.5], time.time() - 5000)  # live: just written
    store = RunStore()
    LogdirWatcher([tmp_path], store).scan_once()
    index = JobIndex(store)
    looked: list[Path] = []
    get = index._records.get

    def get_looked(job_dir: Path) -> AgentRecord | None:
        looked.append(job_dir)
        return get(job_dir)

    monkeypatch.setattr(index._records, "get", get_looked)
    index.refresh()  # the first looks at all
    looked.clear()
    snap = index.refresh()
    assert snap is not None and {j.status for j in snap.jobs} == {"live"}
    assert len(looked) == 3  # a share (6 // 2), not every live job
    (tmp_path / "job5" / "run.json").write_text(json.dumps({"status": "finished"}))
    for _ in range(2):  # every job within two refreshes
        snap = index.refresh()
    assert snap is not None and {j.name: j.status for j in snap.jobs}["job5"] == "finished"


def test_only_the_live_runs_whose_time_has_come_are_looked_at_again(tmp_path: Path) -> None:
    now = time.time()
    for i in range(3):
        write_scalars(tmp_path / f"run{i}", [1.0, 0.5], now)
        age(tmp_path / f"run{i}", 100 * i)  # idle at +300, +200, +100 s
    clock = Clock(now)
    store = RunStore(clock=clock)
    LogdirWatcher([tmp_path], store).scan_once()
    first = store.snapshot()
    assert [r.status for r in first] == ["live"] * 3
    clock.now = now + 150
    second = store.snapshot()
    assert [r.status for r in second] == ["live", "live", "idle"]
    assert second[0] is first[0] and second[1] is first[1]
    clock.now = now + 1000
    assert [r.status for r in store.snapshot()] == ["idle"] * 3


class CountingProfiles(ProfileReader):
    """The profile reader, counting the places it is asked for (one per job and run looked at)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def local_for(self, location: RunLocation) -> Path | None:
        self.asked += 1
        return super().local_for(location)


class Hiding(RunStore):
    """A store whose snapshot leaves out the runs `hidden` (the watcher's store keeps every
    run it saw, so this is how a job goes away here)."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden: set[str] = set()
        self.version = 0
        self._shown: tuple[int, tuple[RunSnapshot, ...], tuple[RunSnapshot, ...]] | None = None

    def snapshot(self) -> tuple[RunSnapshot, ...]:
        runs = super().snapshot()
        if self._shown is None or self._shown[0] != self.version or self._shown[1] is not runs:
            shown = tuple(r for r in runs if r.name not in self.hidden)
            self._shown = (self.version, runs, shown)
        return self._shown[2]


def test_new_jobs_are_handed_to_the_profile_reader_without_a_pass_over_the_others(
    tmp_path: Path,
) -> None:
    """A first read adds jobs tick after tick: each tick looks at the new jobs only (a pass
    over every job each tick made listing 100,000 jobs quadratic). A job's profile stays on
    it as others come and go; a job gone is forgotten."""
    def add(name: str) -> None:
        write_scalars(tmp_path / name / "train", [1.0, 0.5], time.time() - 5000)
        watcher.scan_once()

    def profiled() -> dict[str, Job]:
        snap = index.refresh()
        assert snap is not None
        return {job.name: job for job in snap.jobs if job.profile is not None}

    store = Hiding()
    watcher = LogdirWatcher([tmp_path], store)
    for i in range(20):
        add(f"old{i}")
    session = tmp_path / "old7" / "train" / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    write(session / "host.xplane.pb", space({"/host:CPU": training_steps(4)}))
    profiles = CountingProfiles()
    index = JobIndex(store, profiles=profiles)
    index.refresh()
    assert profiles.asked >= 40  # each job and its run
    profiles.read_once()
    first = profiled()
    assert list(first) == ["old7"] and isinstance(first["old7"].profile, ProfileSummary)
    profiles.asked = 0
    add("new")
    after = profiled()
    assert profiles.asked == 3  # the new job and its run, and the profiled job's place
    assert after == first and after["old7"] is first["old7"]  # merged once, kept
    store.hidden = {"old0/train"}  # a run gone from the store: its job is forgotten
    store.version += 1
    assert profiled() == first
    assert tmp_path / "old0" not in profiles.watched()
    assert tmp_path / "new" in profiles.watched()
    held = index._records.held()  # the run.json looked for: the job gone's is forgotten
    assert tmp_path / "old0" not in held and {tmp_path / "new", tmp_path / "old1"} <= held
    store.hidden = {"old7/train"}
    store.version += 1
    assert profiled() == {} and tmp_path / "old7" not in profiles.latest()
