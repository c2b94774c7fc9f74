"""`distmon --serve --metrics` under a flood of idle connections and at its open-file limit: a
real subprocess, real sockets from this one, its limit set with setrlimit/prlimit."""

from __future__ import annotations

import functools
import os
import re
import resource
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from distcore.metrics_http import IDLE_TIMEOUT
from tests.core.test_metrics import _control_bytes
from tests.kit.wait import wait_until
from tests.kit.writers import write_job
from tests.tui.test_serve import Serve, scrape

# A job directory with the control characters a terminal or a log reader acts on.
PROMTOOL = shutil.which("promtool")
HOSTILE_JOB = "bell\x07esc\x1b[31mcr\rdel\x7f"


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def watching(pid: int) -> bool:
    """Whether distmon's watcher has started (its inotify descriptor is open): from then on
    nothing of its start-up (a module imported, the first scan) needs a descriptor."""
    fds = Path(f"/proc/{pid}/fd")
    return any(_link(fd) == "anon_inode:inotify" for fd in fds.iterdir())


def _link(fd: Path) -> str:
    try:
        return os.readlink(fd)
    except OSError:  # closed meanwhile
        return ""


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def limited(soft: int) -> None:
    """In the child before it runs distmon: its open-file limit."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture
def idle() -> Iterator[list[socket.socket]]:
    conns: list[socket.socket] = []
    yield conns
    for c in conns:
        c.close()


def after_start(err: str) -> list[str]:
    """The lines of --serve's log after its serving line, the decoder's left out (said at the
    start where no C compiler built the kernel)."""
    return [line for line in err.splitlines()[1:] if not line.startswith("distmon: decoder:")]


def test_a_thousand_idle_connections_neither_stall_a_scrape_nor_hold_threads(
    tmp_path: Path, idle: list[socket.socket]
) -> None:
    """At the usual limit of 1,024 descriptors, 1,000 idle connections: distmon keeps 64 of them
    at most, and a scrape is answered at once; a job named with control bytes reaches it
    escaped."""
    ours = resource.getrlimit(resource.RLIMIT_NOFILE)
    if ours[0] < 1100:
        if ours[1] != resource.RLIM_INFINITY and ours[1] < 1100:
            pytest.skip("this process may not open 1,100 descriptors")
        resource.setrlimit(resource.RLIMIT_NOFILE, (1100, ours[1]))
    write_job(tmp_path / "logs", HOSTILE_JOB, [0.5, 0.4])
    serve = Serve(tmp_path, ["--metrics", "0", "--no-gpu", str(tmp_path / "logs")],
                  preexec_fn=lambda: limited(1024))  # fmt: skip
    try:
        port = serve.port()
        wait_until(lambda: "distmon_scalar{" in scrape(port))
        for _ in range(1000):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        started = time.monotonic()
        text = scrape(port)
        # Not stalled: a scrape held behind the idle connections would wait out their timeout.
        assert time.monotonic() - started < IDLE_TIMEOUT / 2
        assert "distmon_scalar{" in text and _control_bytes(text) == set()
        assert 'job="bell\\\\x07esc\\\\x1b[31mcr\\\\rdel\\\\x7f"' in text
        if PROMTOOL is not None:  # Prometheus' own reader of the exposition, and its lint
            done = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(),
                                  capture_output=True, timeout=60, check=False)  # fmt: skip
            assert done.returncode == 0 and not done.stdout + done.stderr, done
        # 64 connections and those being hung up; the process's own descriptors and threads.
        assert open_files(serve.proc.pid) < 64 * 2 + 40
        assert threads(serve.proc.pid) < 64 * 2 + 40
    finally:
        assert serve.stop() == 0
    assert after_start(serve.stderr()) == ["distmon: stopped"]  # not a word per client


def test_out_of_descriptors_is_one_line_and_scrapes_and_sampling_come_back(
    tmp_path: Path, idle: list[socket.socket]
) -> None:
    """The limit lowered under a running distmon to a few descriptors more than it holds: idle
    connections take them, the host sampler fails with one line (not a traceback per sample),
    and once they close, scrapes answer and the sampler works again."""
    write_job(tmp_path / "logs", "job", [0.5, 0.4])
    serve = Serve(tmp_path, ["--metrics", "0", "--no-gpu", "--refresh", "0.2",
                             str(tmp_path / "logs")], preexec_fn=lambda: limited(256))  # fmt: skip
    try:
        port = serve.port()
        wait_until(lambda: "distmon_host_cpu_ratio" in scrape(port))
        pid = serve.proc.pid
        wait_until(lambda: watching(pid), timeout=30)
        room = open_files(pid) + 4
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (room, room))
        for _ in range(12):  # beyond the room: the rest wait in the listen backlog
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        wait_until(lambda: "Too many open files" in serve.stderr(), timeout=30)
        time.sleep(1.0)  # five samples at 0.2 s: each failing, one line in all
        for c in idle:
            c.close()

        def healthy() -> bool:
            try:
                text = scrape(port)
            except (urllib.error.URLError, OSError):
                return False
            return 'producer="telemetry"' not in text and "distmon_host_cpu_ratio" in text

        wait_until(healthy, timeout=30)
    finally:
        assert serve.stop() == 0
    err = serve.stderr()
    # Between the start and the stop lines, one line for the whole failing stretch.
    assert after_start(err) == [
        "distmon: error (telemetry): sampling failed: Too many open files "
        f"(at this process's limit of {room}: ulimit -n)", "distmon: stopped"], err


# Limits from a few descriptors more than Python needs to start to enough for everything: in
# between, start-up runs out at one place or another (the listening socket, an ssh host's
# pipes, the watcher's inotify or the import of its module, the first scan).
START_LIMITS = range(6, 17)


def _settled(serve: Serve, limit: int) -> bool:
    """Exited, serving the job its first scan found, or holding every descriptor it may (it
    waits for one to come free: alive, not crashed)."""
    if serve.proc.poll() is not None:
        return True
    match = re.search(r"serving metrics at http://127\.0\.0\.1:(\d+)/", serve.stderr())
    if match is None:
        return False
    try:
        if open_files(serve.proc.pid) >= limit:
            return True
        url = f"http://127.0.0.1:{match.group(1)}/metrics"
        with urllib.request.urlopen(url, timeout=2) as response:
            return b"distmon_jobs 1.0" in response.read()
    except OSError:  # no descriptor left to accept us yet; or it has just exited
        return False


@pytest.mark.slow  # eleven distmons starting at once: 10-30 s on a loaded machine
def test_start_up_at_low_open_file_limits_serves_or_says_so_in_one_line(tmp_path: Path) -> None:
    """`distmon --serve` started at each of START_LIMITS with a logdir and two ssh hosts that
    never answer (each holds its pipes): it serves, polling where inotify or the import of its
    module found no descriptor left, or ends with one line naming the limit and exit 1; never
    a crash report."""
    write_job(tmp_path / "logs", "job", [0.5, 0.4])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text("#!/bin/sh\nexec sleep 600\n")
    (bin_dir / "ssh").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    serves: dict[int, Serve] = {}
    for limit in START_LIMITS:
        (tmp_path / str(limit)).mkdir()
        serves[limit] = Serve(tmp_path / str(limit), ["--metrics", "127.0.0.1:0", "--no-gpu",
                              str(tmp_path / "logs"), "h1:/runs", "h2:/runs"], env=env,
                              preexec_fn=functools.partial(limited, limit))  # fmt: skip
    try:
        wait_until(lambda: all(_settled(s, n) for n, s in serves.items()), timeout=90, every=0.3)
    finally:
        codes = {limit: serve.stop() for limit, serve in serves.items()}
    for limit, serve in serves.items():
        err = serve.stderr()
        assert "crashed" not in err and "Traceback" not in err, (limit, err)
        if codes[limit] != 0:
            assert codes[limit] == 1, (limit, err)
            assert err.splitlines()[-1].startswith(
                "distmon: out of file descriptors: Too many open files (at this process's "
                f"limit of {limit}: "), (limit, err)
