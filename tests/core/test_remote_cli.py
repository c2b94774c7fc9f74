"""`distmon [user@]host:PATH` and URLs from the command line: parsing (pure, tables and generated
inputs) and `distmon --once` as a real process against a real sshd and S3 server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distcore.errors import DistmonError
from distcore.remote.smi_query import parse_line
from distcore.remote.spec import (
    LocalSpec,
    SshSpec,
    UrlSpec,
    parse_source,
    parse_storage_options,
    redact_options,
)
from distcore.remote.ssh import ssh_reason
from tests.core.remote_servers import moto_server
from tests.kit.sshd import HOST_ALIAS, Sshd, started_sshd
from tests.kit.writers import scalar_records

INSTALLS = "pip install -e '.[test]' installs it (make test does)"

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("arg", "spec"),
    [
        ("runs", LocalSpec(Path("runs"))),
        ("./a:b", LocalSpec(Path("./a:b"))),
        ("/data/x:y", LocalSpec(Path("/data/x:y"))),
        ("file:///tmp/runs", LocalSpec(Path("/tmp/runs"))),
        ("gpu1:/data/runs", SshSpec("gpu1", None, "/data/runs")),
        ("alice@gpu1.example.org:runs", SshSpec("gpu1.example.org", "alice", "runs")),
        ("gpu1:", SshSpec("gpu1", None, ".")),
        ("[::1]:~/runs", SshSpec("[::1]", None, "~/runs")),
        ("bob@[fe80::1%eth0]:/r", SshSpec("[fe80::1%eth0]", "bob", "/r")),
        ("s3://bucket/prefix", UrlSpec("s3://bucket/prefix", "s3")),
        ("GS://b", UrlSpec("GS://b", "gs")),
    ],
)
def test_parse_source(arg: str, spec: object) -> None:
    assert parse_source(arg) == spec


@pytest.mark.parametrize(
    "arg", ["-oProxyCommand=evil:/x", "a b:/x", "user;rm@h:/x", "h:/x\nz", "s3://", "@h:/x"]
)
def test_malformed_remote_sources_are_refused(arg: str) -> None:
    with pytest.raises(DistmonError):
        parse_source(arg)


@given(st.text(max_size=40))
def test_no_argument_reaches_ssh_as_an_option(arg: str) -> None:
    try:
        spec = parse_source(arg)
    except DistmonError as err:
        assert "\n" not in str(err).replace("\\n", "")
        return
    if isinstance(spec, SshSpec):
        assert not spec.destination.startswith("-") and not spec.host.startswith("-")
        assert "\n" not in spec.path and "\0" not in spec.path


@pytest.mark.parametrize(
    ("stderr", "reason"),
    [
        ("ssh: Could not resolve hostname gpu9: Name or service not known\r\n",
         "Could not resolve hostname gpu9: Name or service not known"),
        ("Warning: Permanently added '[h]:22' (ED25519) to the list of known hosts.\n"
         "alice@h: Permission denied (publickey).\n", "alice@h: Permission denied (publickey)"),
        ("ssh: connect to host 127.0.0.1 port 9: Connection refused\n",
         "connect to host 127.0.0.1 port 9: Connection refused"),
        ("Host key verification failed.\n", "Host key verification failed"),
        ("", "connection closed"),
        ("evil \x1b]0;title\x07 text\n", "evil \\x1b]0;title\\x07 text"),
    ],
)  # fmt: skip
def test_ssh_reason_is_one_safe_line(stderr: str, reason: str) -> None:
    assert ssh_reason(stderr) == reason


def test_storage_options() -> None:
    options = parse_storage_options(
        ["anon=true", "endpoint_url=http://127.0.0.1:9000", "client_kwargs.region_name=eu-1"]
    )
    assert options == {
        "anon": True,
        "endpoint_url": "http://127.0.0.1:9000",
        "client_kwargs": {"region_name": "eu-1"},
    }
    assert redact_options({"secret": "s", "key": "k", "a": {"token": "t"}, "anon": True}) == {
        "secret": "***", "key": "***", "a": {"token": "***"}, "anon": True,
    }  # fmt: skip
    with pytest.raises(DistmonError):
        parse_storage_options(["novalue"])


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "3, NVIDIA A100-SXM4-40GB, GPU-1, 100, 35, 39000, 40960, 70, 399.12, 400.00, 1410, 44",
            (3, "NVIDIA A100-SXM4-40GB", 100.0, 39000.0, 399.12, 44.0),
        ),
        (
            "0, Tesla T4, GPU-2, [N/A], [Not Supported], 0, 15360, 30, [Unknown Error], 70.00,"
            " 300, [N/A]",
            (0, "Tesla T4", None, 0.0, None, None),
        ),
    ],
)
def test_parse_nvidia_smi_line(line: str, expected: tuple[object, ...]) -> None:
    gpu = parse_line(line)
    assert gpu is not None
    assert (gpu.index, gpu.name, gpu.utilization_gpu, gpu.memory_used_mib, gpu.power_w,
            gpu.fan_percent) == expected  # fmt: skip


@pytest.mark.parametrize("line", ["", "No devices were found", "Failed to initialize NVML", "a, b"])
def test_nvidia_smi_noise_is_not_a_gpu(line: str) -> None:
    assert parse_line(line) is None


def distmon(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    paths = [ROOT / "shared", ROOT / "agent", ROOT / "tui"]
    full_env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(map(str, paths))}
    return subprocess.run(
        [sys.executable, "-m", "distmon", *args], capture_output=True, text=True, env=full_env,
        timeout=120,
    )  # fmt: skip


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    """Sessions without nvidia-smi on their PATH (the kit's `sshd` has a stand-in)."""
    with started_sshd(tmp_path) as server:
        yield server


@pytest.mark.slow
def test_once_json_with_a_remote_logdir_and_a_failing_one(sshd: Sshd, tmp_path: Path) -> None:
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "a" / "events.out.tfevents.1.h").write_bytes(
        scalar_records("loss", [(0, 1.0), (1, 0.5)])
    )
    result = distmon(
        "--once", "--json", "--no-gpu", "--ssh-config", str(sshd.config),
        f"{HOST_ALIAS}:{tmp_path}/runs", f"{HOST_ALIAS}:/no/such/dir",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    (run,) = doc["runs"]
    assert run["name"] == f"{HOST_ALIAS}:runs/a" and run["scalars"]["loss"]["last_step"] == 1
    assert run["path"] == f"{HOST_ALIAS}:{tmp_path}/runs/a"
    messages = [e["message"] for e in doc["errors"]]
    assert messages == [f"{HOST_ALIAS}:/no/such/dir: no such directory"]
    text = distmon(
        "--once", "--no-gpu", "--ssh-config", str(sshd.config), f"{HOST_ALIAS}:/nope",
        str(tmp_path / "missing"),
    )  # fmt: skip
    assert text.returncode == 2  # no source at all could be read: one line each
    assert text.stderr == (
        f"distmon: {tmp_path}/missing: no such log directory\n"
        f"distmon: {HOST_ALIAS}:/nope: no such directory\n"
    )
    one_ok = distmon(
        "--once", "--no-gpu", "--ssh-config", str(sshd.config), f"{HOST_ALIAS}:{tmp_path}/runs",
        str(tmp_path / "missing"),
    )  # fmt: skip
    assert (
        one_ok.returncode == 0
        and f"error (logdir): {tmp_path}/missing: no such log directory" in one_ok.stdout
    )


@pytest.mark.slow
def test_the_dashboards_producers_read_remote_logdirs(sshd: Sshd, tmp_path: Path) -> None:
    from distmon.options import Options
    from distmon.producers import make_producers

    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "events.out.tfevents.1.h").write_bytes(scalar_records("loss", [(4, 1.0)]))
    options = Options(
        logdirs=(), no_gpu=True, ssh_config=sshd.config,
        remotes=(SshSpec(HOST_ALIAS, None, str(tmp_path)),),
    )  # fmt: skip
    made = make_producers(options)
    remote = made.extra[0]  # the remote readers fill the dashboard's store
    try:
        assert remote.scan_once() == {f"{HOST_ALIAS}:r"}  # type: ignore[attr-defined]
        (run,) = [r for r in made.store.snapshot() if r.name == f"{HOST_ALIAS}:r"]
        assert run.scalars["loss"].last_step == 4
    finally:
        remote.close()


@pytest.mark.slow
def test_the_producer_sets_index_reads_a_remote_jobs_run_json(sshd: Sshd, tmp_path: Path) -> None:
    """The remote reader's run.json reaches the job through the wiring the dashboard and
    `--once` share (ProducerSet hands the remote readers to the index as record sources)."""
    from distmon.options import Options
    from distmon.producers import ProducerSet, make_producers

    job = tmp_path / "runs" / "j"
    (job / "train").mkdir(parents=True)
    (job / "train" / "events.out.tfevents.1.h").write_bytes(scalar_records("loss", [(4, 1.0)]))
    (job / "run.json").write_text(json.dumps({"status": "failed", "replicas": 4}))
    options = Options(
        logdirs=(), no_gpu=True, ssh_config=sshd.config,
        remotes=(SshSpec(HOST_ALIAS, None, str(tmp_path / "runs")),),
    )  # fmt: skip
    snap = ProducerSet(make_producers(options), options).read_once()
    (found,) = [j for j in snap.jobs if j.name.endswith("j")]
    assert found.status == "failed" and found.agent is not None and found.agent.replicas == 4


@pytest.mark.slow
def test_once_remote_gpus_in_hosts(sshd: Sshd, tmp_path: Path) -> None:
    result = distmon(
        "--once", "--json", "--ssh-config", str(sshd.config), f"{HOST_ALIAS}:{tmp_path}"
    )
    doc = json.loads(result.stdout)
    assert [h["source"] for h in doc["hosts"]] == ["local", "ssh"]  # this machine first
    host = doc["hosts"][1]
    # No nvidia-smi on this remote: the host is there, saying why it has no GPUs.
    assert host["key"] == f"ssh:{HOST_ALIAS}" and doc["hosts"][0]["key"] == "local"
    assert host["name"] == HOST_ALIAS and host["gpus"] == []
    assert host["gpu_reason"] == f"nvidia-smi not found on {HOST_ALIAS}"


@pytest.mark.slow
def test_once_s3_with_endpoint_option_and_unknown_host(tmp_path: Path) -> None:
    s3fs = pytest.importorskip("s3fs", reason=f"s3fs missing: {INSTALLS}")
    if shutil.which("ssh") is None:  # the unknown host's line is ssh's own words
        pytest.skip("no OpenSSH client (.ci/run installs it)")
    server = moto_server(tmp_path / "moto.log")
    try:
        env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": "/dev/null",
               "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}  # fmt: skip
        fs = s3fs.S3FileSystem(endpoint_url=server.url, key="testing", secret="testing")
        fs.mkdir("bkt")
        fs.pipe_file("bkt/logs/r/events.out.tfevents.1.h", scalar_records("acc", [(3, 0.9)]))
        result = distmon(
            "--once", "--json", "--no-gpu", "--storage-option", f"endpoint_url={server.url}",
            "s3://bkt/logs", "nosuchhost.invalid:/x", env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        assert [(r["name"], r["path"]) for r in doc["runs"]] == [("s3://bkt/logs/r",) * 2]
        (error,) = (e["message"] for e in doc["errors"])
        assert error.startswith("nosuchhost.invalid: host unreachable since ")
        assert "Could not resolve hostname" in error
        assert "testing" not in result.stdout + result.stderr  # credentials never shown
    finally:
        server.close()
