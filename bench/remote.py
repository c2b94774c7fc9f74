"""Remote logdirs: write-to-store latency over SSH and over an S3 API server, and the bytes one
refresh moves when a 100 MB logdir grows by 1 MB.

Everything runs on 127.0.0.1: an OpenSSH sshd started from a temporary directory (as the tests
do) and moto's S3 server. Latency: a writer appends one scalar record every ~100 ms; the time
from the write to the point being in the store, p50/p95, for the SSH reader, the S3 reader, and
the anchor measured in the same run: distcore's local polling at the same interval (what the
network adds). Bytes: after the logdir grew, what one refresh received (every byte of every
ssh command's output, listings and headers included; for S3 every byte the server sent, counted
by a relay) beside what re-reading the whole files costs, and the time of each.

Run: .venv/bin/python bench/remote.py [--points 30] [--size-mb 100] [--grow-mb 1] [--refresh 1]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' server fixtures

from distcore.events import LogdirWatcher, RunStore
from distcore.remote import make_remote_producers, parse_source
from distcore.remote.fsspec_logdir import FsspecLogdirReader
from distcore.remote.spec import SshSpec
from distcore.remote.ssh_logdir import SshLogdirReader
from tests.core.remote_servers import CountingProxy, moto_server
from tests.kit.sshd import HOST_ALIAS, Sshd
from tests.kit.writers import record, scalar_event

RUNS = 10


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _image_record(step: int, size: int) -> bytes:
    """A large record, as image summaries make event files large."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    image = summary_pb2.Summary.Image(height=1, width=1, encoded_image_string=os.urandom(size))
    value = summary_pb2.Summary.Value(tag="samples", image=image)
    event = event_pb2.Event(
        wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=[value])
    )
    return record(event.SerializeToString())


def _grow(run: Path, step: int, nbytes: int, put: Callable[[Path, bytes], object]) -> None:
    """`put` writes a file's new bytes (what it returns is not used)."""
    data = b"".join(_image_record(step + i, 100_000) for i in range(max(1, nbytes // 100_000)))
    data += record(scalar_event("loss", step, 1.0 / (step + 1), time.time()))
    put(run / "events.out.tfevents.1.bench", data)


class Probe:
    """When each step reached the store (through the store's change notifications)."""

    def __init__(self, store: RunStore, name: str) -> None:
        self.seen: dict[int, float] = {}
        self._store, self._name = store, name
        store.subscribe(self._changed)

    def _changed(self, names: frozenset[str]) -> None:
        now = time.monotonic()
        run = self._store.get(self._name)
        if run is not None and "loss" in run.scalars:
            for step in run.scalars["loss"].steps:
                self.seen.setdefault(int(step), now)


def _latency(
    points: int, first: int, start: Callable[[RunStore], Any], append: Callable[[int], None],
    name: str,
) -> list[float]:  # fmt: skip
    store = RunStore()
    probe = Probe(store, name)
    producer = start(store)
    time.sleep(1.5)  # first read done
    written: dict[int, float] = {}
    try:
        for step in range(first, first + points):
            append(step)
            written[step] = time.monotonic()
            time.sleep(random.uniform(0.07, 0.13))
        deadline = time.monotonic() + 15
        while len([s for s in written if s in probe.seen]) < points and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        producer.close()
    return [probe.seen[s] - t for s, t in written.items() if s in probe.seen]


def bench_latency(tmp: Path, sshd: Sshd, s3: Any, args: argparse.Namespace) -> None:
    run = tmp / "lat" / "run"
    run.mkdir(parents=True)
    path = run / "events.out.tfevents.1.bench"
    path.write_bytes(record(scalar_event("loss", 0, 1.0)))

    def append_local(step: int) -> None:
        with open(path, "ab", buffering=0) as f:
            f.write(record(scalar_event("loss", step, 1.0, time.time())))

    def ssh_reader(store: RunStore) -> Any:
        spec = SshSpec(HOST_ALIAS, None, str(tmp / "lat"))
        remote = make_remote_producers(
            [spec], store, refresh=args.refresh, ssh_config=sshd.config, gpus=False
        )
        remote.start()
        return remote

    def local_poll(store: RunStore) -> Any:
        watcher = LogdirWatcher([tmp / "lat"], store, poll=True, poll_interval=args.refresh)
        watcher.start()
        return watcher

    obj: list[bytes] = [path.read_bytes()]

    def append_s3(step: int) -> None:  # an object store "append": the object rewritten
        obj[0] += record(scalar_event("loss", step, 1.0, time.time()))
        s3.pipe_file("bench/lat/run/events.out.tfevents.1.bench", obj[0])

    def s3_reader(store: RunStore) -> Any:
        remote = make_remote_producers(
            [parse_source("s3://bench/lat")], store, refresh=args.refresh
        )
        remote.start()
        return remote

    s3.pipe_file("bench/lat/run/events.out.tfevents.1.bench", obj[0])
    print(
        f"write-to-store latency, refresh {args.refresh:g} s, a point every ~100 ms,"
        f" {args.repeats} alternating rounds (medians of the rounds' p50 and p95):"
    )
    modes = [
        ("local polling (anchor)", local_poll, append_local, "run"),
        ("ssh host:PATH", ssh_reader, append_local, f"{HOST_ALIAS}:run"),
        ("s3:// (moto server)", s3_reader, append_s3, "s3://bench/lat/run"),
    ]
    p50s: dict[str, list[float]] = {m[0]: [] for m in modes}
    p95s: dict[str, list[float]] = {m[0]: [] for m in modes}
    step = 10_000  # each round writes new steps: the file is shared, an old step is a restart
    for round_ in range(args.repeats):
        order = modes if round_ % 2 == 0 else modes[::-1]
        for label, start, append, name in order:
            delays = _latency(args.points, step, start, append, name)
            step += 10_000
            p50s[label].append(_percentile(delays, 0.5) * 1000)
            p95s[label].append(_percentile(delays, 0.95) * 1000)
    anchor = statistics.median(p50s[modes[0][0]])
    for label, *_ in modes:
        p50, p95 = statistics.median(p50s[label]), statistics.median(p95s[label])
        print(
            f"  {label:<24} p50 {p50:6.0f} ms  p95 {p95:6.0f} ms   {p50 / anchor:.2f}x the"
            f" anchor's p50   (rounds' p50 {min(p50s[label]):.0f}-{max(p50s[label]):.0f} ms)"
        )


def bench_bytes(
    tmp: Path, sshd: Sshd, s3: Any, proxy: CountingProxy, args: argparse.Namespace
) -> None:
    root = tmp / "big"
    per_run = args.size_mb * 1_000_000 // RUNS
    for i in range(RUNS):
        (root / f"run{i}").mkdir(parents=True)
        _grow(root / f"run{i}", 0, per_run, lambda p, d: p.write_bytes(d))
    total = sum(p.stat().st_size for p in root.rglob("*tfevents*"))
    for p in root.rglob("*tfevents*"):
        s3.pipe_file(f"bench/{p.relative_to(tmp)}", p.read_bytes())
    ssh_store, s3_store = RunStore(), RunStore()
    ssh = make_remote_producers([SshSpec(HOST_ALIAS, None, str(root))], ssh_store,
                                ssh_config=sshd.config, gpus=False)  # fmt: skip
    s3r = make_remote_producers([parse_source("s3://bench/big")], s3_store)
    ssh.scan_once()
    s3r.scan_once()
    ssh_reader, s3_reader = ssh.producers[0], s3r.producers[0]
    assert isinstance(ssh_reader, SshLogdirReader) and isinstance(s3_reader, FsspecLogdirReader)
    conn = ssh_reader.connection
    grow = args.grow_mb * 1_000_000 // RUNS

    def put_both(p: Path, data: bytes) -> None:
        with open(p, "ab") as f:
            f.write(data)
        s3.pipe_file(f"bench/{p.relative_to(tmp)}", p.read_bytes())

    for i in range(RUNS):
        _grow(root / f"run{i}", 10_000, grow, put_both)
    grown = sum(p.stat().st_size for p in root.rglob("*tfevents*"))
    before_ssh, before_s3 = conn.bytes_received, proxy.downstream
    t0 = time.perf_counter()
    ssh.scan_once()
    t_ssh = time.perf_counter() - t0
    t0 = time.perf_counter()
    s3r.scan_once()
    t_s3 = time.perf_counter() - t0
    got_ssh, got_s3 = conn.bytes_received - before_ssh, proxy.downstream - before_s3
    # The anchor: re-reading every file whole, over the same connection / server.
    before = conn.bytes_received
    t0 = time.perf_counter()
    whole = sum(p.stat().st_size for p in root.rglob("*tfevents*"))
    conn.run(f"cat {root}/run*/*tfevents*", timeout=300, limit=whole + 4096)  # all it asks
    t_cat = time.perf_counter() - t0
    whole_ssh = conn.bytes_received - before
    before = proxy.downstream
    t0 = time.perf_counter()
    s3_fs = s3_reader._fs  # the reader's own filesystem: the same client and server
    for p in root.rglob("*tfevents*"):
        s3_fs.cat_file(f"bench/{p.relative_to(tmp)}")
    t_get = time.perf_counter() - t0
    whole_s3 = proxy.downstream - before
    ssh.close()
    s3r.close()
    mb = 1e6
    grew = (grown - total) / mb
    print(f"\none refresh after a {total / mb:.0f} MB logdir ({RUNS} runs) grew by {grew:.2f} MB:")
    for label, got, took, whole, whole_took, anchor in (
        ("ssh", got_ssh, t_ssh, whole_ssh, t_cat, "whole files (cat)"),
        ("s3", got_s3, t_s3, whole_s3, t_get, "whole objects (GET)"),
    ):
        print(
            f"  {label:<4} {got / mb:7.2f} MB in {took:5.2f} s;  {anchor}: {whole / mb:6.1f} MB"
            f" in {whole_took:5.2f} s  -> {whole / max(got, 1):.0f}x fewer bytes"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=30)
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--grow-mb", type=int, default=1)
    parser.add_argument("--refresh", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3, help="alternating latency rounds")
    args = parser.parse_args()
    os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    import s3fs

    with tempfile.TemporaryDirectory(prefix="distmon-bench-remote-") as name:
        tmp = Path(name)
        (tmp / "sshd").mkdir()
        sshd = Sshd(tmp / "sshd")
        sshd.start()
        server = moto_server(tmp / "moto.log")
        proxy = CountingProxy(server.port)
        for key, value in {"AWS_ENDPOINT_URL": proxy.url, "AWS_ACCESS_KEY_ID": "bench",
                           "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
                           "AWS_CONFIG_FILE": "/dev/null",
                           "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}.items():  # fmt: skip
            os.environ[key] = value
        s3 = s3fs.S3FileSystem(endpoint_url=server.url, skip_instance_cache=True)
        s3.mkdir("bench")
        try:
            bench_latency(tmp, sshd, s3, args)
            bench_bytes(tmp, sshd, s3, proxy, args)
        finally:
            proxy.close()
            server.close()
            sshd.stop()


if __name__ == "__main__":
    main()
