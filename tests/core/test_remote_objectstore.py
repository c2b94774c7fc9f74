"""s3:// and gs:// logdirs through the real s3fs / gcsfs clients, against a real S3 API server
(moto in server mode) and a GCS emulator on 127.0.0.1, behind a relay that counts the bytes the
server sends."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from distcore.events.store import RunStore
from distcore.remote import make_remote_producers, parse_source
from distcore.remote.fsspec_logdir import describe_error
from tests.core.remote_servers import CountingProxy, ServerProcess, gcs_emulator, moto_server
from tests.kit.wait import wait_until
from tests.kit.writers import record, scalar_event, scalar_records, session_start, write_scalars

INSTALLS = "pip install -e '.[test]' installs it (make test does)"

pytestmark = pytest.mark.slow
# gcsfs's gRPC bucket-layout probe retries for 60 s against an emulator (read at import).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
s3fs = pytest.importorskip("s3fs", reason=f"s3fs missing: {INSTALLS}")
gcsfs = pytest.importorskip("gcsfs", reason=f"gcsfs missing: {INSTALLS}")


@dataclass
class ObjectStore:
    scheme: str
    writer: Any  # an fsspec filesystem talking to the server directly (not counted)
    proxy: CountingProxy
    options: dict[str, Any]

    def url(self, path: str) -> str:
        return f"{self.scheme}://{path}"

    def put(self, path: str, data: bytes) -> None:
        """Write (or replace) an object: how TF's S3/GCS writers "append" on each flush."""
        self.writer.pipe_file(f"bucket/{path}", data)


@pytest.fixture(params=["s3", "gs"])
def objects(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ObjectStore]:
    server: ServerProcess
    if request.param == "s3":
        server = moto_server(tmp_path / "moto.log")
        proxy = CountingProxy(server.port)
        for name, value in {
            "AWS_ENDPOINT_URL": proxy.url, "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        }.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        writer = s3fs.S3FileSystem(
            endpoint_url=server.url, key="testing", secret="testing", skip_instance_cache=True
        )
        options: dict[str, Any] = {}
    else:
        server = gcs_emulator(tmp_path / "gcs.log")
        proxy = CountingProxy(server.port)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        writer = gcsfs.GCSFileSystem(
            endpoint_url=server.url, token="anon", skip_instance_cache=True
        )
        options = {"token": "anon"}
    writer.mkdir("bucket")
    try:
        yield ObjectStore(request.param, writer, proxy, options)
    finally:
        proxy.close()
        server.close()


def tensorboardx_file(tmp_path: Path, points: int) -> bytes:
    write_scalars(tmp_path / "tbx", [1.0 / (step + 1) for step in range(points)])
    (path,) = (tmp_path / "tbx").glob("*tfevents*")
    return path.read_bytes()


def reader_for(objects: ObjectStore, prefix: str, store: RunStore) -> Any:
    remote = make_remote_producers(
        [parse_source(objects.url(f"bucket/{prefix}"))], store, storage_options=objects.options
    )
    return remote


def test_discovery_and_reads_proportional_to_what_was_appended(
    objects: ObjectStore, tmp_path: Path
) -> None:
    base = tensorboardx_file(tmp_path, 20_000)
    objects.put("logs/run1/events.out.tfevents.1.host", base)
    objects.put("logs/run2/train/events.out.tfevents.2.host", scalar_records("acc", [(0, 0.5)]))
    objects.put("logs/notes.txt", b"not an event file")
    store = RunStore()
    remote = reader_for(objects, "logs", store)
    assert remote.scan_once() == {
        objects.url("bucket/logs/run1"),
        objects.url("bucket/logs/run2/train"),
    }
    run = store.get(objects.url("bucket/logs/run1"))
    assert run is not None and run.scalars["loss"].count == 20_000 and run.problems == ()
    assert remote.readable() and remote.errors() == ()

    appended = scalar_records("loss", [(20_000 + i, 0.25) for i in range(2_000)])
    objects.put("logs/run1/events.out.tfevents.1.host", base + appended)
    before = objects.proxy.downstream
    remote.scan_once()
    sent = objects.proxy.downstream - before
    run = store.get(objects.url("bucket/logs/run1"))
    assert run is not None and run.scalars["loss"].count == 22_000
    # What travelled: the appended bytes plus a listing and HTTP headers, not the whole file.
    assert len(appended) <= sent < len(appended) + 32_000, (sent, len(appended))
    assert sent < len(base) / 5
    before = objects.proxy.downstream
    remote.scan_once()  # nothing new: a listing only
    assert objects.proxy.downstream - before < 16_000
    remote.close()


def test_restart_rule_and_replaced_objects(objects: ObjectStore) -> None:
    first = scalar_records("loss", [(s, 1.0) for s in range(10)])
    objects.put("r/a/events.out.tfevents.1.h", first)
    store = RunStore()
    remote = reader_for(objects, "r", store)
    remote.scan_once()
    # A restarted job: a new file whose points start again at step 6 replace steps >= 6.
    objects.put("r/a/events.out.tfevents.2.h", scalar_records("loss", [(6, 2.0), (7, 2.0)]))
    remote.scan_once()
    loss = store.get(objects.url("bucket/r/a")).scalars["loss"]  # type: ignore[union-attr]
    assert list(loss.steps) == list(range(8)) and loss.values[-2:] == (2.0, 2.0)
    # A session restart record purges the whole run from its step on.
    objects.put("r/a/events.out.tfevents.2.h", scalar_records("loss", [(6, 2.0), (7, 2.0)])
                + record(session_start(3)) + scalar_records("loss", [(3, 9.0)]))  # fmt: skip
    remote.scan_once()
    loss = store.get(objects.url("bucket/r/a")).scalars["loss"]  # type: ignore[union-attr]
    assert list(loss.steps) == [0, 1, 2, 3] and loss.values[-1] == 9.0
    # The first object replaced by a longer, different one: read again from its start.
    objects.put(
        "r/a/events.out.tfevents.1.h", scalar_records("loss", [(s, 5.0) for s in range(12)])
    )
    remote.scan_once()
    remote.scan_once()
    loss = store.get(objects.url("bucket/r/a")).scalars["loss"]  # type: ignore[union-attr]
    assert loss.values[-1] == 5.0 and int(loss.steps[-1]) == 11
    remote.close()


def test_damaged_records_are_listed_under_problems(objects: ObjectStore) -> None:
    good = record(scalar_event("loss", 0, 1.0))
    bad = bytearray(record(scalar_event("loss", 1, 2.0)))
    bad[-1] ^= 0xFF  # the data CRC
    objects.put(
        "d/run/events.out.tfevents.1.h", good + bytes(bad) + record(scalar_event("loss", 2, 3.0))
    )
    store = RunStore()
    remote = reader_for(objects, "d", store)
    remote.scan_once()
    run = store.get(objects.url("bucket/d/run"))
    assert run is not None and [int(s) for s in run.scalars["loss"].steps] == [0, 2]
    assert len(run.problems) == 1 and "bad data CRC" in run.problems[0]
    remote.close()


def test_object_names_from_outside_are_kept_as_they_are(objects: ObjectStore) -> None:
    names = ["a b", "ünï/cödé", "tab\there", "$(touch PWNED)", "-rf", "percent%20d"]
    for i, name in enumerate(names):
        objects.put(f"n/{name}/events.out.tfevents.1.h", scalar_records("loss", [(i, 1.0)]))
    store = RunStore()
    remote = reader_for(objects, "n", store)
    remote.scan_once()
    assert remote.errors() == ()
    found = {r.name: r.scalars["loss"].last_step for r in store.snapshot()}
    assert found == {objects.url(f"bucket/n/{name}"): i for i, name in enumerate(names)}
    remote.close()


def test_missing_bucket_is_one_line(objects: ObjectStore) -> None:
    store = RunStore()
    remote = make_remote_producers(
        [parse_source(objects.url("no-such-bucket/logs"))], store, storage_options=objects.options
    )
    remote.scan_once()
    (error,) = remote.errors()
    assert error.message == f"{objects.url('no-such-bucket/logs')}: no such bucket or path"
    assert not remote.readable()
    remote.close()


def test_an_unreachable_endpoint_is_one_line_and_nothing_else_on_stderr(tmp_path: Path) -> None:
    code = (
        "from distcore.events.store import RunStore\n"
        "from distcore.remote import make_remote_producers, parse_source\n"
        "r = make_remote_producers([parse_source('s3://b/p')], RunStore(),\n"
        "    storage_options={'endpoint_url': 'http://127.0.0.1:9', 'key': 'AKIAEXAMPLE',\n"
        "    'secret': 'sekrit', 'config_kwargs': {'retries': {'max_attempts': 1}}})\n"
        "r.scan_once(); print(r.errors()[0].message)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr == ""
    assert out.stdout.startswith("s3://b/p: ") and out.stdout.count("\n") == 1
    assert "sekrit" not in out.stdout and "AKIAEXAMPLE" not in out.stdout


def test_a_missing_extra_names_the_pip_command() -> None:
    code = (
        "import sys; sys.modules['s3fs'] = None\n"
        "from distcore.events.store import RunStore\n"
        "from distcore.remote import make_remote_producers, parse_source\n"
        "r = make_remote_producers([parse_source('s3://b/p')], RunStore()); r.scan_once()\n"
        "print(r.errors()[0].message)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "s3://b/p: reading s3:// needs the s3 extra: pip install 'distmon[s3]'\n"


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (FileNotFoundError("bucket/x"), "no such bucket or path"),
        (PermissionError("AccessDenied"), "access denied"),
        (OSError("An error occurred (AccessDenied) when calling ListObjectsV2"), "access denied"),
        (
            OSError("An error occurred (InvalidAccessKeyId): key AKIA..."),
            "access denied (unknown access key)",
        ),
        (RuntimeError("line one\nline two\x1b[31m"), "RuntimeError: line one line two\\x1b[31m"),
    ],
)
def test_describe_error_is_one_safe_line(error: BaseException, line: str) -> None:
    assert describe_error("s3://b", error) == line


def test_a_refresh_that_raises_is_shown_backs_off_and_recovers() -> None:
    """The reader's loop (Loop) on fsspec's in-process memory filesystem: a refresh that raises
    (here the store's listener) is the URL's one-line error until a refresh succeeds."""
    import fsspec

    from tests.core.test_remote_ssh import raising_listener

    fs = fsspec.filesystem("memory")
    root = f"/distmon-loop-{os.getpid()}/logs"
    path = f"{root}/run/events.out.tfevents.1.h"
    points = [(0, 1.0)]
    fs.pipe_file(path, scalar_records("loss", points))
    store = RunStore()
    broken = raising_listener(store)
    remote = make_remote_producers([parse_source(f"memory://{root}")], store, refresh=0.05)
    remote.start()

    def failing() -> tuple[object, ...]:
        # The object grows each look: every refresh has a change for the broken listener.
        points.append((len(points), 1.0))
        fs.pipe_file(path, scalar_records("loss", points))
        return remote.errors()

    try:
        wait_until(failing)
        (error,) = remote.errors()
        assert error.producer.startswith("url:memory://")
        assert error.message.endswith(": RuntimeError: listener broke")
        broken.clear()
        points.append((len(points), 2.0))
        fs.pipe_file(path, scalar_records("loss", points))

        def recovered() -> bool:
            runs = store.snapshot()
            count = len(points)
            return bool(runs) and runs[0].scalars["loss"].count == count and not remote.errors()

        wait_until(recovered)
    finally:
        remote.close()
        fs.rm(root, recursive=True)
