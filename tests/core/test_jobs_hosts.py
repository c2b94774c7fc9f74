"""Hosts from `system/` and `system/worker-<i>/` runs written by the real SystemRecorder."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from distagent.system_record import SystemRecorder
from distcore import names
from distcore.events import load_once
from distcore.jobs.hosts import host_context, host_from_system_run, is_stale, on_this_machine
from distcore.jobs.snapshots import Host
from distcore.snapshot import SNAPSHOT_VERSION
from distcore.telemetry import TelemetrySource
from distcore.telemetry.host import PsutilHostReader
from distcore.telemetry.simulated import SimulatedGpuSource
from distmon.once import run_once
from distmon.options import Options
from tests.core.test_jobs_incremental import Clock
from tests.kit.wait import wait_until
from tests.tui import fixed


def record(job: Path, workers: int, gpus: int, samples: int = 3) -> None:
    """Each worker's recorder writes its own system/worker-<i>/ as a multi-worker job does."""
    recorders = [
        SystemRecorder(
            job, interval=0.05, subdir=names.worker_system_dir(i),
            source=TelemetrySource(SimulatedGpuSource(gpus), PsutilHostReader()),
        )
        for i in range(workers)
    ]  # fmt: skip
    for recorder in recorders:
        recorder.start()
    try:
        wait_until(lambda: min(r.written for r in recorders) >= samples,
                   f"{samples} samples from each worker", 30)
    finally:
        for recorder in recorders:
            recorder.close()


@pytest.mark.slow
def test_each_worker_is_a_host_with_its_gpus(tf: Any, tmp_path: Path) -> None:
    record(tmp_path / "job", workers=2, gpus=2)
    runs = {r.name: r for r in load_once([tmp_path])}
    hosts = [
        host_from_system_run("job", f"system/worker-{i}", runs[f"job/system/worker-{i}"])
        for i in (0, 1)
    ]
    assert [h.worker for h in hosts] == [0, 1]
    for host in hosts:
        assert [g.index for g in host.gpus] == [0, 1]
        assert all(g.utilization_gpu is not None and g.memory_used_mib is not None
                   for g in host.gpus)  # fmt: skip
        assert all(g.memory_total_mib is None for g in host.gpus)  # not recorded: unknown
        assert host.cpu_percent is not None and host.sampled_at is not None
        assert host.interval_seconds is not None and host.interval_seconds < 1.0
        assert not is_stale(host, host.sampled_at + 1.0)

    out = io.StringIO()
    options = Options(logdirs=(tmp_path,), once=True, json=True, simulate_gpus=1)
    assert run_once(options, out) == 0
    doc = json.loads(out.getvalue())
    assert doc["version"] == SNAPSHOT_VERSION
    assert [h["source"] for h in doc["hosts"]] == ["local", "logdir", "logdir"]
    local, *workers = doc["hosts"]
    assert local["worker"] is None and local["simulated"] and len(local["gpus"]) == 1
    device_fields = set(doc["gpus"]["devices"][0])
    assert [w["worker"] for w in workers] == [0, 1]
    for worker in workers:
        assert set(worker) >= {"name", "worker", "source", "age_seconds", "gpus", "cpu_percent"}
        assert len(worker["gpus"]) == 2
        assert set(worker["gpus"][0]) == device_fields  # the same fields as gpus.devices
        assert worker["gpus"][0]["memory_total_mib"] is None  # not recorded: unknown, not 0
        assert worker["gpus"][0]["utilization_gpu"] is not None
        assert worker["age_seconds"] >= 0


def _with_hparams(run: Any, hparams: dict[str, Any]) -> Any:
    from dataclasses import replace

    return replace(run, hparams=hparams)


@pytest.mark.parametrize(
    ("part", "hparams", "name", "worker"),
    [
        ("system/worker-3", {}, "job worker 3", 3),
        ("system/worker-3", {"host": "gpu7", "worker": 1}, "gpu7", 1),  # the recorder's word wins
        ("system", {"host": "gpu7"}, "gpu7", None),
        ("system", {}, "job system", None),
        ("system/worker-2", {"host": "", "worker": "x"}, "job worker 2", 2),  # junk: fall back
        ("system/worker-2", {"worker": 1.0}, "job worker 1", 1),
    ],
)
def test_host_names_and_workers(
    part: str, hparams: dict[str, Any], name: str, worker: int | None
) -> None:
    run = _with_hparams(
        fixed.run(f"job/{part}", fixed.series("gpu/0/utilization", [50.0, 60.0], every=5.0)),
        hparams,
    )
    host = host_from_system_run("job", part, run)
    assert (host.name, host.worker, host.source) == (name, worker, "logdir")
    assert [g.utilization_gpu for g in host.gpus] == [60.0]


@pytest.mark.parametrize(
    ("age", "interval", "stale"),
    [(5.0, 5.0, False), (15.0, 5.0, False), (15.1, 5.0, True), (40.0, 10.0, True),
     (29.0, 10.0, False), (1.0, None, False), (16.0, None, True)],
)  # fmt: skip
def test_stale_after_a_few_intervals(age: float, interval: float | None, stale: bool) -> None:
    host = Host("k", "h", "logdir", sampled_at=1000.0, interval_seconds=interval)
    assert is_stale(host, 1000.0 + age) is stale


def _host(key: str, source: str, machine: str | None, *, simulated: bool = False,
          gpus: tuple[Any, ...] = ()) -> Host:
    return Host(key, machine or key, source,  # type: ignore[arg-type]
                job="j" if source == "logdir" else None, machine=machine, simulated=simulated,
                gpus=gpus)


@pytest.mark.parametrize(("hosts", "shown", "folded"), [
    # Two workers of a launch-local job on this machine: one machine, listed once.
    ([_host("local", "local", "gpu7"), _host("w0", "logdir", "gpu7"),
      _host("w1", "logdir", "gpu7")], ["local"], ["w0", "w1"]),
    # Workers elsewhere stay, and are never merged with each other (split GPUs).
    ([_host("local", "local", "gpu7"), _host("w0", "logdir", "gpu8"),
      _host("w1", "logdir", "gpu8")], ["local", "w0", "w1"], []),
    # No recorded host name: nothing proves where it ran.
    ([_host("local", "local", "gpu7"), _host("w0", "logdir", None)], ["local", "w0"], []),
    # Simulated GPUs recorded by a job are not this machine's real ones.
    ([_host("local", "local", "gpu7"), _host("w0", "logdir", "gpu7", simulated=True,
                                             gpus=(fixed.gpu(0, 50.0, 1.0),))],
     ["local", "w0"], []),
    # A CPU job beside simulated GPUs: its host figures are this machine's.
    ([_host("local", "local", "gpu7", simulated=True), _host("w0", "logdir", "gpu7")],
     ["local"], ["w0"]),
    # An ssh host of the same name is a source of its own: kept.
    ([_host("local", "local", "gpu7"), _host("ssh:gpu7", "ssh", "gpu7")],
     ["local", "ssh:gpu7"], []),
    ([_host("w0", "logdir", "gpu7")], ["w0"], []),  # no local sampler
])
def test_one_machine_is_listed_once(hosts: list[Host], shown: list[str], folded: list[str]) -> None:
    kept, here = on_this_machine(hosts)
    assert [h.key for h in kept] == shown and [h.key for h in here] == folded


@pytest.mark.parametrize(("host", "context"), [
    # A recorded host name: the worker and the job are said beside it.
    (Host("k", "gpu7", "logdir", worker=1, job="quickstart", machine="gpu7"),
     ("worker 1", "job quickstart")),
    # A job name inside the host's name is still said (the name does not say it is the job).
    (Host("k", "a-node", "logdir", worker=0, job="a", machine="a-node"), ("worker 0", "job a")),
    # No recorded host name: the name is already "<job> worker <i>".
    (Host("k", "quickstart worker 1", "logdir", worker=1, job="quickstart"), ()),
    (Host("k", "quickstart train", "logdir", job="quickstart"), ()),
    # An ssh host belongs to no job; a job's name reaches the terminal escaped.
    (Host("k", "gpu9", "ssh"), ()),
    (Host("k", "n", "logdir", job="x\x1b[31m", machine="n"), ("job x\\x1b[31m",)),
])
def test_what_a_host_heading_says_beside_its_name(host: Host, context: tuple[str, ...]) -> None:
    assert host_context(host) == context


@pytest.mark.slow
def test_once_names_this_machines_workers_under_it_not_among_other_hosts(
    tf: Any, tmp_path: Path
) -> None:
    """Workers the real recorder wrote on this machine are this machine: `--once` says so under
    its own lines, as the dashboard does, rather than listing it again as another host."""
    record(tmp_path / "job", workers=2, gpus=1)
    out = io.StringIO()
    assert run_once(Options(logdirs=(tmp_path,), once=True, no_gpu=True), out) == 0
    text = out.getvalue()
    assert "also here: job job worker 0, job job worker 1" in text
    assert "Other hosts" not in text and "STALE" not in text


def write_system(job: Path, walls: list[float]) -> None:
    """A worker's system/ samples as the recorder writes them, on the writing host's clock."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(job / "system"))
    for step, wall in enumerate(walls):
        writer.add_scalar(names.HOST_CPU_PERCENT, 50.0, step, walltime=wall)
    writer.flush()
    writer.close()


@pytest.mark.parametrize("skew", [-3600.0, 0.0, 3600.0])
def test_a_recorded_host_is_stale_by_what_distmon_saw_change(tmp_path: Path, skew: float) -> None:
    """A host's samples written on a clock an hour off: fresh while they change, stale once
    distmon has seen none for a few intervals, whatever the writer's clock says."""
    from tests.core.test_jobs_index import index_over, snapshot

    start = time.time() + skew
    write_system(tmp_path / "job", [start, start + 5.0])
    ticks = Clock(0.0)
    now = time.time()
    index, watcher = index_over(tmp_path, monotonic=ticks, clock=lambda: now + ticks.now)

    def stale() -> bool:
        snap = snapshot(index)
        (found,) = [h for h in snap.hosts if h.source == "logdir"]
        return is_stale(found, snap.generated_at)

    assert not stale()
    ticks.now += 14.0
    write_system(tmp_path / "job", [start + 10.0])  # a new sample: seen changing
    watcher.scan_once()
    assert not stale()
    ticks.now += 14.0
    assert not stale()
    ticks.now += 2.0  # 16 s without a change: past three 5 s intervals (15 s)
    assert stale()
