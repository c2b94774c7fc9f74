"""Remote jobs' TensorFlow profiles: copied by their remote reader into a private folder and
read as a local job's are, over a real sshd and real S3 / GCS servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distcore.jobs.snapshots import JobsSnapshot
from distcore.location import RunLocation
from distcore.profile import ProfileError, ProfileSummary
from distcore.remote.profiles import CAP, ProfileMirror, newest_profiles
from distcore.remote.ssh_reads import take_profile
from distcore.remote.tail import FileMeta
from tests.core.profile_files import space, training_steps
from tests.core.remote_servers import gcs_emulator, moto_server
from tests.kit.sshd import HOST_ALIAS, Sshd, started_sshd
from tests.kit.writers import scalar_records

INSTALLS = "pip install -e '.[test]' installs it (make test does)"
# gcsfs's gRPC bucket-layout probe retries for 60 s against an emulator (read at import).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
SESSION = "2026_01_02_03_04_05"


def _job(root: Path, name: str, profile: bytes) -> None:
    """A Keras-like job: `train/` events and the profile in `train/plugins/profile/`."""
    train = root / name / "train"
    (train / "plugins" / "profile" / SESSION).mkdir(parents=True)
    (train / "events.out.tfevents.1.h").write_bytes(scalar_records("loss", [(1, 1.0)]))
    (train / "plugins" / "profile" / SESSION / "host.xplane.pb").write_bytes(profile)


def _input_bound() -> bytes:
    data: bytes = space({"/host:CPU": training_steps(6, input_ms=8)}).SerializeToString()
    return data


def test_the_newest_profile_of_each_folder_is_due_and_no_path_leaves_the_copies() -> None:
    meta = FileMeta(None, 10, 1.0)
    listing = {
        "a/plugins/profile/2026_01/h.xplane.pb": meta,
        "a/plugins/profile/2027_01/h.xplane.pb": meta,
        "a/b/plugins/profile/1/h.xplane.pb": meta, "plugins/profile/1/x.xplane.pb": meta,
        "a/../../plugins/profile/1/h.xplane.pb": meta, "a/plugins/h.xplane.pb": meta,
        "a/events.out.tfevents.1": meta,
    }  # fmt: skip
    assert sorted(newest_profiles(listing)) == [
        "a/b/plugins/profile/1/h.xplane.pb", "a/plugins/profile/2027_01/h.xplane.pb",
        "plugins/profile/1/x.xplane.pb",
    ]  # fmt: skip


def test_copies_are_private_named_as_the_remote_files_and_removed_on_close() -> None:
    mirror = ProfileMirror()
    place = RunLocation.on_host("gpu1", "/data/runs")
    copies = mirror.logdir(place)
    rel = "j/train/plugins/profile/t/h.xplane.pb"
    meta = FileMeta("1:2", 5, 1.0)
    assert copies.due({rel: meta}) == [(rel, meta)]
    copies.store(rel, meta, _input_bound())
    assert copies.due({rel: meta}) == []  # read once: not again under the same listing
    assert stat.S_IMODE(mirror.root().stat().st_mode) == 0o700
    local = mirror.local_for(place.joinpath("j"))
    assert local is not None and (local / "train" / "plugins" / "profile" / "t").is_dir()
    assert mirror.local_for(RunLocation.on_host("gpu2", "/data/runs/j")) is None
    from distcore.profile import summarize

    copy = local / "train" / "plugins" / "profile" / "t" / "h.xplane.pb"
    summary = mirror.summarize(copy, 30.0, lambda p, t: summarize(p, timeout_s=t))
    assert isinstance(summary, ProfileSummary)
    assert summary.path == "gpu1:/data/runs/" + rel
    copies.store(rel, FileMeta("1:2", 6, 2.0), None, "gone before it was copied")
    gone = mirror.summarize(copy, 30.0, lambda p, t: summarize(p, timeout_s=t))
    assert gone == ProfileError("gpu1:/data/runs/" + rel, "gone before it was copied")
    assert gone.message == "profile unreadable: gone before it was copied"
    mirror.close()
    assert not mirror.root().exists()


def distmon(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "distmon", *args], capture_output=True, text=True, timeout=180,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    """Sessions without nvidia-smi on their PATH (the kit's `sshd` has a stand-in)."""
    with started_sshd(tmp_path) as server:
        yield server


def _profiles(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each job's profile by the job's own name (`host:name`, `s3://bucket/logs/name`)."""
    return {job["name"].rsplit("/", 1)[-1].rsplit(":", 1)[-1]: job.get("profile")
            for job in doc["jobs"]}


@pytest.mark.slow
def test_once_json_shows_a_remote_jobs_profile_over_ssh(sshd: Sshd, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _job(runs, "slow", _input_bound())
    _job(runs, "broken", b"\x0a\xff\xff")
    _job(runs, "huge", b"")
    huge = runs / "huge" / "train" / "plugins" / "profile" / SESSION / "host.xplane.pb"
    os.truncate(huge, 65 << 20)  # sparse: over the size cap, never fetched
    temp = tmp_path / "temp"  # where its private folder of copies goes, and is removed from
    temp.mkdir()
    done = distmon("--once", "--json", "--no-gpu", "--ssh-config", str(sshd.config),
                   f"{HOST_ALIAS}:{runs}", env={"TMPDIR": str(temp)})
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    profiles = _profiles(doc)
    slow = profiles["slow"]
    assert slow["kind"] == "summary" and slow["input_verdict"] == "highly input-bound"
    where = f"{HOST_ALIAS}:{runs}/slow/train/plugins/profile/{SESSION}/host.xplane.pb"
    assert slow["path"] == where
    assert ("slow/train", "profile_input_bound") in {
        (a["run"].rsplit(":", 1)[-1], a["kind"]) for a in doc["alerts"]}
    assert profiles["broken"]["message"].startswith("profile unreadable: not an XSpace")
    assert profiles["huge"]["message"] == "profile unreadable: over the 64 MiB size cap"
    assert list(temp.iterdir()) == []


@pytest.mark.slow
def test_the_dashboards_producers_read_a_remote_profile_when_it_appears(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the producers' own threads, as the dashboard runs them: a job's profile is shown
    once copied, a newer session replaces it, and the copies go with the producers."""
    from distcore.remote.spec import SshSpec
    from distmon.options import Options
    from distmon.producers import ProducerSet, make_producers

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    runs = tmp_path / "runs"
    _job(runs, "slow", _input_bound())
    options = Options(logdirs=(), no_gpu=True, ssh_config=sshd.config, refresh=0.2,
                      remotes=(SshSpec(HOST_ALIAS, None, str(runs)),))
    producers = ProducerSet(make_producers(options), options)
    shown: list[str] = []
    seen = threading.Condition()

    def snapshot(snap: JobsSnapshot) -> None:
        with seen:
            shown.extend(j.profile.path for j in snap.jobs if isinstance(j.profile,
                                                                          ProfileSummary))
            seen.notify_all()

    try:
        producers.launch(snapshot, lambda seconds, error: None)
        with seen:  # the waits bound a failure only
            assert seen.wait_for(lambda: any(SESSION in p for p in shown), 60), shown
        newer = runs / "slow" / "train" / "plugins" / "profile" / "2027_01_01_00_00_00"
        newer.mkdir()
        (newer / "host.xplane.pb").write_bytes(_input_bound())
        with seen:
            assert seen.wait_for(lambda: any("2027_01_01" in p for p in shown), 60), shown
        assert any(p.name.startswith("distmon-profiles-") for p in temp.iterdir())
    finally:
        producers.close()
    assert list(temp.iterdir()) == []


def test_what_ssh_answers_for_a_profile_it_could_not_send() -> None:
    assert take_profile(b"5\nhello", CAP) == (b"hello", "")
    assert take_profile(b"-\n", CAP) == (None, "gone before it was copied")
    assert take_profile(b"+ 99999999999\n", CAP) == (None, "over the 64 MiB size cap")
    assert take_profile(b"9\nhello", CAP) == (None, "cut short while it was copied")


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_once_json_shows_a_profile_in_an_object_store(scheme: str, tmp_path: Path) -> None:
    fsspec_module = pytest.importorskip("s3fs" if scheme == "s3" else "gcsfs",
                                        reason=f"missing: {INSTALLS}")
    env: dict[str, str] = {}
    if scheme == "s3":
        server = moto_server(tmp_path / "moto.log")
        env |= {"AWS_ENDPOINT_URL": server.url, "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}
        writer = fsspec_module.S3FileSystem(endpoint_url=server.url, key="testing",
                                            secret="testing", skip_instance_cache=True)
        options: list[str] = []
    else:
        server = gcs_emulator(tmp_path / "gcs.log")
        env["STORAGE_EMULATOR_HOST"] = server.url
        writer = fsspec_module.GCSFileSystem(endpoint_url=server.url, token="anon",
                                             skip_instance_cache=True)
        options = ["--storage-option", "token=anon"]
    try:
        writer.mkdir("bkt")
        writer.pipe_file("bkt/logs/slow/train/events.out.tfevents.1.h",
                         scalar_records("loss", [(1, 1.0)]))
        profile = f"logs/slow/train/plugins/profile/{SESSION}/host.xplane.pb"
        writer.pipe_file(f"bkt/{profile}", _input_bound())
        done = distmon("--once", "--json", "--no-gpu", *options, f"{scheme}://bkt/logs",
                       env=env)
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        slow = _profiles(doc)["slow"]
        assert slow["kind"] == "summary" and slow["input_verdict"] == "highly input-bound"
        assert slow["path"] == f"{scheme}://bkt/{profile}"
        assert "profile_input_bound" in {a["kind"] for a in doc["alerts"]}
    finally:
        server.close()
