"""One reader contract, three transports: the same logdirs read locally, over SSH (a real sshd on
127.0.0.1) and from S3 (moto in server mode) through the whole path (reader -> RunStore -> job
index) give the same points, problems, jobs, statuses and alerts."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from distcore.events.store import RunStore
from distcore.events.watch import LogdirWatcher
from distcore.jobs.index import JobIndex
from distcore.jobs.snapshots import Job, JobsSnapshot
from distcore.remote import make_remote_producers, parse_source
from distcore.remote.spec import SshSpec
from tests.core.remote_servers import ServerProcess, moto_server
from tests.kit.sshd import HOST_ALIAS, Sshd, sshd_available, started_sshd
from tests.kit.writers import record, scalar_event

pytestmark = pytest.mark.slow
KINDS = ("local", "ssh", "s3")
NOW = 1150.0  # the index's clock: 100 s after the last point, 20 x the cadence (a stall)
_S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
}  # fmt: skip


@dataclass
class Servers:
    sshd: Sshd | None
    s3: Any  # an s3fs filesystem writing to the server directly
    s3_url: str | None


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    root = tmp_path_factory.mktemp("servers")
    started = contextlib.ExitStack()  # the sshd where one is installed (its tests skip else)
    sshd = started.enter_context(started_sshd(root)) if sshd_available() else None
    moto: ServerProcess | None = None
    writer = None
    try:
        import s3fs

        moto = moto_server(root / "moto.log")
        writer = s3fs.S3FileSystem(
            endpoint_url=moto.url, key="testing", secret="testing", skip_instance_cache=True
        )
    except ImportError:
        pass
    saved = {k: os.environ.get(k) for k in (*_S3_ENV, "AWS_ENDPOINT_URL")}
    os.environ.update(_S3_ENV)
    if moto is not None:
        os.environ["AWS_ENDPOINT_URL"] = moto.url
    try:
        yield Servers(sshd, writer, moto.url if moto else None)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if moto is not None:
            moto.close()
        started.close()


@dataclass
class Read:
    snapshot: JobsSnapshot
    bytes_received: int  # what crossed the connection (ssh), 0 otherwise


def read(kind: str, servers: Servers, tree: Path, rel: str) -> Read:
    """Everything under `tree`/`rel` through the whole path, as `kind` serves it."""
    store = RunStore()
    producers: tuple[Any, ...]
    hosts: tuple[Any, ...] = ()
    records: tuple[Any, ...] = ()
    if kind == "local":
        watcher = LogdirWatcher([tree / rel], store)
        watcher.scan_once()
        producers, close = (watcher,), watcher.close
    else:
        if kind == "ssh":
            if servers.sshd is None:
                pytest.skip(
                    "OpenSSH server not installed (.ci/run: apt-get install openssh-server)"
                )
            spec: Any = SshSpec(HOST_ALIAS, None, str(tree / rel))
        else:
            if servers.s3 is None:
                pytest.skip("s3fs not installed: pip install 'distmon[s3]'")
            bucket = f"parity-{abs(hash(str(tree))) % 10**9}"
            if not servers.s3.exists(bucket):
                servers.s3.mkdir(bucket)
                for path in sorted(p for p in tree.rglob("*") if p.is_file()):
                    servers.s3.pipe_file(f"{bucket}/{path.relative_to(tree)}", path.read_bytes())
            spec = parse_source(f"s3://{bucket}/{rel}")
        config = servers.sshd.config if servers.sshd is not None else None
        remote = make_remote_producers([spec], store, ssh_config=config, gpus=False)
        remote.scan_once()
        producers, hosts, close = (remote,), remote.host_sources, remote.close
        records = (remote,)
    try:
        index = JobIndex(store, producers=producers, records=records, hosts=hosts,
                         clock=lambda: NOW)
        snap = index.refresh()
        assert snap is not None
        received = sum(getattr(p, "connection", None).bytes_received  # type: ignore[union-attr]
                       for p in getattr(producers[0], "producers", ())
                       if getattr(p, "connection", None) is not None)  # fmt: skip
        return Read(snap, received)
    finally:
        close()


def short(name: str) -> str:
    """A job or run name without its source's prefix (`host:`, `s3://bucket/rel/`)."""
    if name.startswith("s3://"):
        return name.split("/", 4)[-1]
    return name.split(":", 1)[-1] if ":" in name else name


def jobs_by_name(snap: JobsSnapshot) -> dict[str, Job]:
    return {short(job.name): job for job in snap.jobs}


def points(snap: JobsSnapshot) -> dict[str, list[tuple[int, float]]]:
    out = {}
    for job in snap.jobs:
        for run in job.parts.values():
            for tag, series in run.scalars.items():
                out[f"{short(run.name)}/{tag}"] = list(
                    zip(series.steps, series.values, strict=True)
                )
    return out


def events(steps: range, value: float) -> bytes:
    return b"".join(record(scalar_event("loss", s, value, 1000.0 + 5 * s)) for s in steps)


@pytest.mark.parametrize("kind", KINDS)
def test_a_stopped_and_resumed_run_reads_as_tensorboard_does(
    kind: str, servers: Servers, tmp_path: Path
) -> None:
    train = tmp_path / "runs" / "job" / "train"
    train.mkdir(parents=True)
    # Five sessions, each resumed from a checkpoint before the previous one's end; created
    # newest first, so a listing in directory order is not the order TensorBoard reads.
    for n in reversed(range(5)):
        (train / f"events.out.tfevents.{1000 + n}.host").write_bytes(
            events(range(30 * n, 30 * n + 40), float(n))
        )
    got = points(read(kind, servers, tmp_path, "runs").snapshot)
    expected = [(s, float(min(s // 30, 4))) for s in range(160)]
    assert got == {"job/train/loss": expected}


def write_jobs(runs: Path) -> None:
    for name, doc in {
        "failed": {"status": "failed", "error": "CUDA out of memory", "last_step": 9,
                   "plan": {"replicas": 4, "global_batch_size": 128}},
        "done": {"status": "finished", "last_step": 9, "end_time": 1010.0},
    }.items():  # fmt: skip
        for part in ("train", "validation"):
            (runs / name / part).mkdir(parents=True)
            (runs / name / part / "events.out.tfevents.1.host").write_bytes(events(range(10), 1.0))
        (runs / name / "run.json").write_text(json.dumps(doc))
    (runs / "lone" / "train").mkdir(parents=True)  # no run.json: stalls like any silent run
    (runs / "lone" / "train" / "events.out.tfevents.1.host").write_bytes(events(range(10), 1.0))


@pytest.mark.parametrize("kind", KINDS)
def test_run_json_gives_status_plan_and_outcome(
    kind: str, servers: Servers, tmp_path: Path
) -> None:
    write_jobs(tmp_path / "runs")
    jobs = jobs_by_name(read(kind, servers, tmp_path, "runs").snapshot)
    assert sorted(jobs) == ["done", "failed", "lone"]
    failed, done, lone = jobs["failed"], jobs["done"], jobs["lone"]
    assert failed.status == "failed" and failed.agent is not None
    assert (failed.agent.replicas, failed.agent.global_batch_size) == (4, 128)
    assert [(a.kind, a.severity) for a in failed.alerts] == [("job_failed", "critical")]
    assert "CUDA out of memory" in failed.alerts[0].message
    assert done.status == "finished" and done.alerts == ()  # ended: never "stalled?"
    assert lone.agent is None and [a.kind for a in lone.alerts] == ["run_stalled"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_job_directory_is_one_job(kind: str, servers: Servers, tmp_path: Path) -> None:
    write_jobs(tmp_path / "runs")
    (job,) = read(kind, servers, tmp_path, "runs/failed").snapshot.jobs
    assert sorted(job.parts) == ["train", "validation"]
    assert job.status == "failed" and [a.kind for a in job.alerts] == ["job_failed"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_hole_is_skipped_where_it_lies_and_the_record_after_it_kept(
    kind: str, servers: Servers, tmp_path: Path
) -> None:
    run = tmp_path / "runs" / "sparse"
    run.mkdir(parents=True)
    hole = (64 << 20) if kind != "s3" else (12 << 20)  # S3 objects are not sparse: upload less
    with (run / "events.out.tfevents.1.host").open("wb") as f:
        f.write(events(range(3), 1.0))
        f.seek(hole, os.SEEK_CUR)  # a sparse file: nothing on disk for the hole
        f.write(events(range(3, 5), 2.0))
    got = read(kind, servers, tmp_path, "runs")
    (job,) = got.snapshot.jobs
    (part,) = job.parts.values()
    assert [int(s) for s in part.scalars["loss"].steps] == [0, 1, 2, 3, 4]
    assert len(part.problems) == 1 and "zero bytes skipped" in part.problems[0]
    local = read("local", servers, tmp_path, "runs").snapshot.jobs[0]
    assert part.problems == next(iter(local.parts.values())).problems
    if kind == "ssh":  # the hole did not cross: at most a read's last piece of it
        assert got.bytes_received < (256 << 10) + (16 << 10), got.bytes_received


def test_a_remote_job_never_reads_a_local_path_named_like_it(
    servers: Servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`host:/data/job` is no path relative to the cwd: a run.json planted there is not read."""
    (tmp_path / "runs" / "job" / "train").mkdir(parents=True)
    (tmp_path / "runs" / "job" / "train" / "events.out.tfevents.1.host").write_bytes(
        events(range(10), 1.0)
    )
    cwd = tmp_path / "cwd"
    planted = cwd / f"{HOST_ALIAS}:{tmp_path}" / "runs" / "job"
    planted.mkdir(parents=True)
    (planted / "run.json").write_text(json.dumps({"status": "failed", "error": "planted"}))
    monkeypatch.chdir(cwd)
    (job,) = read("ssh", servers, tmp_path, "runs").snapshot.jobs
    assert job.agent is None and job.status != "failed"
