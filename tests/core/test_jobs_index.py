"""The job index over real event files: grouping, statuses, run.json, incremental alerts, errors."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from distcore.events import LogdirWatcher, RunStore
from distcore.jobs.agent import AgentRecords, agent_record_from
from distcore.jobs.index import JobIndex
from distcore.jobs.parts import job_status, split_run, worker_of
from distcore.jobs.snapshots import JobsSnapshot
from distcore.location import RunLocation
from distcore.producer import ProducerError
from tests.kit.wait import wait_until
from tests.kit.writers import write_scalars
from tests.tui import fixed


def index_over(root: Path, **kwargs: Any) -> tuple[JobIndex, LogdirWatcher]:
    """An index over a real store, filled by a real watcher's scan (scan again to update)."""
    store = RunStore()
    watcher = LogdirWatcher([root], store)
    watcher.scan_once()
    return JobIndex(store, logdirs=[str(root)], **kwargs), watcher


def snapshot(index: JobIndex) -> JobsSnapshot:
    snap = index.refresh()
    assert snap is not None, index.errors()
    return snap


@pytest.mark.parametrize(
    ("name", "job", "part"),
    [
        ("quickstart/train", "quickstart", "train"),
        ("quickstart/validation", "quickstart", "validation"),
        ("quickstart/system", "quickstart", "system"),
        ("a/b/system/worker-12", "a/b", "system/worker-12"),
        ("system/worker-1", ".", "system/worker-1"),
        ("train", ".", "train"),
        ("pytorch/exp1", "pytorch/exp1", ""),
        ("x/worker-1", "x/worker-1", ""),  # a worker folder outside system/ is a run
        ("x/system/worker-x", "x/system/worker-x", ""),
    ],
)
def test_split_run(name: str, job: str, part: str) -> None:
    assert split_run(name) == (job, part)


@pytest.mark.parametrize(
    ("part", "worker"), [("system/worker-3", 3), ("system", None), ("train", None), ("", None)]
)
def test_worker_of(part: str, worker: int | None) -> None:
    assert worker_of(part) == worker


@pytest.mark.parametrize(
    ("doc", "status", "step", "lr"),
    [
        ({"status": "diverged", "last_step": 7, "error": "NaN"}, "diverged", 7, None),
        ({"status": 3, "last_step": "7"}, None, None, None),  # wrong types: unknown, no error
        ({"plan": {"learning_rate": 0.04, "base_learning_rate": 0.01, "replicas": 4,
                   "per_replica_batch_size": 32, "scaling_rule": "linear"}},
         None, None, "0.01 @ batch 32 × 4 replicas (linear) = 0.04"),
        ({"plan": {"learning_rate": float("inf")}}, None, None, None),
        ({"last_step": True}, None, None, None),  # a bool is not a step
    ],
)  # fmt: skip
def test_agent_record_from_untrusted_json(
    doc: dict[str, Any], status: str | None, step: int | None, lr: str | None
) -> None:
    record = agent_record_from(doc)
    assert record is not None
    assert (record.status, record.last_step, record.learning_rate) == (status, step, lr)


@pytest.mark.parametrize("doc", [[], "running", 3, None])
def test_a_run_json_that_is_not_an_object_is_no_record(doc: Any) -> None:
    assert agent_record_from(doc) is None


@pytest.mark.parametrize(
    ("statuses", "agent", "expected"),
    [
        (["live", "idle"], None, "live"),
        (["idle", "gone"], None, "idle"),
        (["gone"], None, "gone"),
        (["live"], "finished", "finished"),
        (["gone"], "diverged", "diverged"),
        (["live"], "bogus", "live"),  # an unknown run.json status: the files decide
    ],
)
def test_job_status(statuses: list[str], agent: str | None, expected: str) -> None:
    parts = {str(i): fixed.run(f"j/{i}", status=s) for i, s in enumerate(statuses)}
    record = agent_record_from({"status": agent}) if agent else None
    assert job_status(parts, record) == expected


def test_run_json_is_read_again_only_when_it_changes(tmp_path: Path) -> None:
    records = AgentRecords()
    path = tmp_path / "run.json"
    assert records.get(tmp_path) is None
    path.write_text(json.dumps({"status": "running"}))
    first = records.get(tmp_path)
    assert first is not None and first.status == "running"
    assert records.get(tmp_path) is first  # cached: same object
    path.write_text(json.dumps({"status": "finished", "last_step": 10}))
    os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    again = records.get(tmp_path)
    assert again is not None and again.status == "finished"
    path.unlink()
    assert records.get(tmp_path) is None


def test_jobs_group_parts_and_read_run_json(tmp_path: Path) -> None:
    now = time.time()
    for part in ("train", "validation", "system", "system/worker-1"):
        write_scalars(tmp_path / "job" / part, [1.0, 0.9, 0.8], now - 3)
    write_scalars(tmp_path / "lone", [1.0, 0.5], now - 2)
    (tmp_path / "job" / "run.json").write_text(
        json.dumps({"status": "diverged", "last_step": 42, "error": "loss became NaN at step 40"})
    )
    snap = snapshot(index_over(tmp_path)[0])
    assert [j.name for j in snap.jobs] == ["job", "lone"]
    job = snap.jobs[0]
    assert list(job.parts) == ["system", "system/worker-1", "train", "validation"]
    assert job.status == "diverged"
    assert job.directory == RunLocation.on_this_machine(tmp_path / "job")
    assert [(h.key, h.worker) for h in job.hosts] == [
        ("logdir:job/system", None), ("logdir:job/system/worker-1", 1)
    ]
    critical = [a for a in snap.alerts if a.severity == "critical"]
    assert [(a.kind, a.run) for a in critical] == [("job_diverged", "job")]
    assert "step 42" in critical[0].message and "NaN at step 40" in critical[0].message
    assert snap.hosts[0].source == "local" and len(snap.hosts) == 3


def test_ended_jobs_never_stall_and_running_ones_do(tmp_path: Path) -> None:
    start = time.time() - 400  # 60 points a second apart, then 340 s of silence
    for name in ("finished", "running", "plain"):
        write_scalars(tmp_path / name / "train", [1.0 / (1 + i) for i in range(60)], start)
    (tmp_path / "finished" / "run.json").write_text(json.dumps({"status": "finished"}))
    (tmp_path / "running" / "run.json").write_text(json.dumps({"status": "running"}))
    snap = snapshot(index_over(tmp_path)[0])
    stalled = {a.run for a in snap.alerts if a.kind == "run_stalled"}
    assert stalled == {"running/train", "plain/train"}
    assert {j.name: j.status for j in snap.jobs}["finished"] == "finished"


def test_unchanged_jobs_keep_their_facts_and_changed_ones_are_judged_again(tmp_path: Path) -> None:
    now = time.time()
    write_scalars(tmp_path / "a" / "train", [1.0, 0.5, 0.2], now - 3)
    write_scalars(tmp_path / "b" / "train", [1.0, 0.5, 0.2], now - 3)
    index, watcher = index_over(tmp_path)
    first = {j.name: j for j in snapshot(index).jobs}
    write_scalars(tmp_path / "b" / "train", [0.1, float("nan")], now)  # a second file in b
    watcher.scan_once()
    second = {j.name: j for j in snapshot(index).jobs}
    assert second["a"].version == first["a"].version
    assert second["a"].parts["train"] is first["a"].parts["train"]
    assert second["b"].version > first["b"].version
    assert [a.kind for a in second["b"].alerts] == ["loss_nan"]


class Failing:
    """A producer whose thread failed, as a remote reader reports it."""

    def __init__(self) -> None:
        self.calls = 0

    def start(self) -> None: ...
    def close(self) -> None: ...
    def problems(self) -> tuple[str, ...]:
        return ()

    def errors(self) -> tuple[ProducerError, ...]:
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError("errors() itself broke")
        return (ProducerError("ssh:gpu1", "host unreachable since 12:03:04", 1.0),)


class Quiet:
    """A producer with nothing to report."""

    def start(self) -> None: ...
    def close(self) -> None: ...
    def errors(self) -> tuple[ProducerError, ...]:
        return ()

    def problems(self) -> tuple[str, ...]:
        return ()


class BrokenHosts:
    def start(self) -> None: ...
    def close(self) -> None: ...
    def hosts(self) -> tuple[Any, ...]:
        raise OSError("connection reset")


def test_producer_errors_are_gathered_and_never_stop_the_index(tmp_path: Path) -> None:
    write_scalars(tmp_path / "a", [1.0, 0.5], time.time() - 2)
    failing = Failing()
    index, _ = index_over(tmp_path, producers=[failing, Quiet()], hosts=[BrokenHosts()])
    snap = snapshot(index)
    assert [e.producer for e in snap.errors] == ["ssh:gpu1"]
    assert any(h.error == "connection reset" for h in snap.hosts)
    again = snapshot(index)
    assert [e.producer for e in again.errors] == ["Failing"]
    assert [j.name for j in again.jobs] == ["a"]


def test_the_thread_publishes_after_a_store_change(tmp_path: Path) -> None:
    write_scalars(tmp_path / "a", [1.0, 0.5], time.time() - 2)
    index, watcher = index_over(tmp_path, interval=0.05)
    seen: list[JobsSnapshot] = []
    index.subscribe(seen.append)
    index.start()
    try:
        wait_until(lambda: seen, "the index's first snapshot", 20)
        write_scalars(tmp_path / "b", [1.0], time.time())
        watcher.scan_once()  # a scan fills the store without notifying: the index's tick sees it
        wait_until(lambda: any([j.name for j in s.jobs] == ["a", "b"] for s in seen),
                   "a snapshot of a and b", 20)
    finally:
        index.close()
    assert [j.name for j in seen[-1].jobs] == ["a", "b"]
    assert index.latest() is seen[-1]


class JustBooted:
    """The `time` module as a machine booted a second ago sees it: monotonic() starts near 0."""

    def __init__(self) -> None:
        self._boot = time.monotonic() - 1.0

    def monotonic(self) -> float:
        return time.monotonic() - self._boot

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_the_first_snapshot_is_at_once_on_a_fresh_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long refresh interval never delays the first snapshot, however recent the boot."""
    import distcore.jobs.index as index_module

    monkeypatch.setattr(index_module, "time", JustBooted())
    write_scalars(tmp_path / "a", [1.0, 0.5], time.time() - 2)
    index, _ = index_over(tmp_path, interval=3600.0)
    index.start()
    try:
        wait_until(index.latest, "the first tick's snapshot (it is at once)", 30)
    finally:
        index.close()
    latest = index.latest()
    assert latest is not None and [j.name for j in latest.jobs] == ["a"]


def test_a_remote_run_json_is_never_read_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gpu1:/data/job` was once `PosixPath("gpu1:/data/job")`, i.e. `./gpu1:/data/job` here:
    a decoy run.json there must not become the remote job's record (its reader has none)."""
    monkeypatch.chdir(tmp_path)
    decoy = tmp_path / "gpu1:" / "data" / "job"
    decoy.mkdir(parents=True)
    (decoy / "run.json").write_text(json.dumps({"status": "failed", "last_step": 3}))
    store = RunStore()
    store.set_files("gpu1:job/train", RunLocation.on_host("gpu1", "/data/job/train"), 1, None)
    store.notify(frozenset({"gpu1:job/train"}))
    (job,) = snapshot(JobIndex(store)).jobs
    assert job.directory == RunLocation.on_host("gpu1", "/data/job")
    assert str(job.directory) == "gpu1:/data/job" and job.directory.local is None
    assert job.agent is None and job.status != "failed"
