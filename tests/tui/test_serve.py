"""`distmon --serve`: usage errors, a real subprocess serving /metrics and posting to a real
webhook receiver, and its end on SIGTERM/SIGINT."""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from distmon.cli import main
from distmon.options import Options
from distmon.producers import Producers, ProducerSet, make_producers
from distmon.serve import _levels, parse_listen
from tests.kit.wait import wait_until
from tests.kit.webhook import SECRET, Receiver
from tests.kit.writers import write_job

ROOT = Path(__file__).resolve().parents[2]


T = TypeVar("T")


class Serve:
    """`distmon --serve ...` as a user starts it: a real process, its stderr in a file."""

    def __init__(
        self, tmp: Path, args: Sequence[str], env: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:  # fmt: skip
        env = {**(env or os.environ), "PYTHONPATH": os.pathsep.join(
            str(ROOT / p) for p in ("shared", "agent", "tui"))}  # fmt: skip
        self.err_path = tmp / "serve.err"
        with self.err_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "distmon", "--serve", *args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
                preexec_fn=preexec_fn,
            )  # fmt: skip

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def port(self) -> int:
        def found() -> str | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"distmon exited {self.proc.returncode}: {self.stderr()}")
            match = re.search(r"serving metrics at http://127\.0\.0\.1:(\d+)/", self.stderr())
            return match.group(1) if match else None

        return int(str(wait_until(found)))

    def stop(self, signum: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            return self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode("utf-8"))


def sample(text: str, name: str, **labels: str) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


# --- usage errors: one line, exit 2 --------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--serve"], "--serve needs an output: add --metrics [HOST:]PORT and/or a webhook"),
        (["--metrics", "9100"], "--metrics needs --serve"),
        (["--notify", "http://h/x"], "--notify needs --serve"),
        (["--serve", "--metrics", "abc"], "expected [HOST:]PORT with a port 0-65535"),
        (["--serve", "--metrics", "70000"], "expected [HOST:]PORT with a port 0-65535"),
        (["--serve", "--metrics", ":9100"], "no host before ':'"),
        (["--serve", "--metrics", "0", "--once"], "--serve and --once do not go together"),
        (["--serve", "--notify", "http://h/x", "--notify-level", "loud"], "invalid choice"),
        (["--serve", "--metrics", "0", "--notify-level", "info"], "--notify-level needs a webhook"),
        (["--serve", "--metrics", "0", "--notify-hold", "5"], "--notify-hold needs a webhook"),
        (["--serve", "--notify", "http://h/x", "--notify-hold", "-1"], "expected seconds from 0"),
        (["--notify-file", "/x"], "--notify-file needs --serve"),
        (["--serve", "--notify", "http://h/x", "--notify-file", "/x"], "choose one"),
        (["--serve", "--notify", "http://h/x", "--max-series", "5"], "needs --metrics"),
        (["--serve", "--metrics", "0", "--max-series", "0"], "expected a count from 1 to"),
        (["--serve", "--notify", f"ftp://u:hunter2@h/{SECRET}"], "expected an http:// or https://"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DISTMON_NOTIFY_URL", raising=False)  # a webhook of its own
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1
    assert "hunter2" not in err and SECRET not in err


@pytest.mark.parametrize(
    ("text", "listen"),
    [("9464", ("127.0.0.1", 9464)), ("0.0.0.0:9464", ("0.0.0.0", 9464)),
     ("[::1]:0", ("::1", 0)), ("localhost:65535", ("localhost", 65535))],
)  # fmt: skip
def test_listen_addresses_default_to_loopback(text: str, listen: tuple[str, int]) -> None:
    assert parse_listen(text) == listen


def test_help_names_every_serve_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    flags = ("--serve", "--metrics [HOST:]PORT", "--notify URL", "--notify-file PATH",
             "--notify-level", "--notify-hold SECONDS", "--max-series")  # fmt: skip
    assert all(flag in out for flag in flags)


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        serve = Serve(tmp_path, ["--no-gpu", "--metrics", f"127.0.0.1:{port}", str(tmp_path)])
        assert serve.proc.wait(60) == 2
    err = serve.stderr()
    assert err == f"distmon: --metrics 127.0.0.1:{port}: cannot listen (Address already in use)\n"


# --- the producers ------------------------------------------------------------------------------


def test_a_producer_set_reads_the_logdir_and_closes_every_thread(tmp_path: Path) -> None:
    write_job(tmp_path, "j", [1.0, 0.5])
    options = Options(logdirs=(tmp_path,), no_gpu=True, refresh=0.2)
    producers = ProducerSet(make_producers(options), options)
    producers.start()
    try:
        def jobs() -> list[str]:
            snap = producers.index.latest()
            return [job.name for job in snap.jobs] if snap is not None else []

        assert wait_until(jobs) == ["j"]
    finally:
        producers.close()  # the autouse thread-leak guard checks that each one ended


def test_a_producer_set_closed_first_starts_nothing(tmp_path: Path) -> None:
    options = Options(logdirs=(tmp_path,), no_gpu=True)
    producers = ProducerSet(make_producers(options), options)
    producers.close()
    producers.start()
    assert producers.index.latest() is None and producers.index.refreshes == 0


def test_a_bug_while_starting_is_a_crash_never_exit_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A producer that raises (a bug) ends --serve with the crash status and a log, after
    closing what had started."""
    import dataclasses

    import distmon.serve

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    class Broken:
        def scan_once(self) -> None:
            raise RuntimeError("a bug in the first scan")

        def start(self) -> None: ...
        def close(self) -> None: ...
        def agent_changes(self) -> frozenset[Path]: return frozenset()
        def subscribe_agent_changes(self, callback: Any) -> Any: return lambda: None

    def broken(options: Options) -> Producers:
        stand_in: Any = Broken()  # only the methods serve calls: not a Watcher to mypy
        return dataclasses.replace(make_producers(options), watcher=stand_in)

    monkeypatch.setattr(distmon.serve, "make_producers", broken)
    code = main(["--serve", "--metrics", "0", "--no-gpu", str(tmp_path)])
    assert code not in (0, 2)
    err = capsys.readouterr().err
    assert "a bug in the first scan" in err and "traceback in" in err


@pytest.mark.parametrize(
    ("least", "shown"),
    [("critical", "critical"), ("warning", "warning and critical"),
     ("info", "info, warning and critical")],
)  # fmt: skip
def test_the_start_line_names_the_levels_posted(least: str, shown: str) -> None:
    assert _levels(least) == shown


# --- a real server -------------------------------------------------------------------------------


def test_serve_exports_the_jobs_posts_critical_alerts_once_and_stops_on_sigterm(
    tmp_path: Path, receiver: Receiver
) -> None:
    logdir = tmp_path / "logs"
    write_job(logdir, "mnist", [1.0 / (i + 1) for i in range(20)], status="running")
    write_job(logdir, "broken", [1.0, 0.5, math.nan], status="failed")
    serve = Serve(tmp_path, ["--metrics", "0", "--notify", receiver.url, "--no-gpu", str(logdir)])
    try:
        port = serve.port()

        def both() -> str | None:
            text = scrape(port)
            ready = 'run="mnist/train",tag="loss"' in text and 'job="broken"' in text
            return text if ready else None

        text = str(wait_until(both))
        loss = sample(text, "distmon_scalar", job="mnist", run="mnist/train", tag="loss")
        assert loss == pytest.approx(1.0 / 20)
        assert sample(text, "distmon_scalar_step", job="mnist", tag="loss") == 19
        assert sample(text, "distmon_job_status", job="mnist", distmon_job_status="running") == 1
        assert sample(text, "distmon_job_status", job="broken", distmon_job_status="failed") == 1
        assert sample(text, "distmon_alert", job="broken", kind="job_failed") == 1
        wait_until(lambda: {b["kind"] for b in receiver.bodies} >= {"job_failed", "loss_nan"})
        write_job(logdir, "later", [3.0, 2.0], status="running")  # a new job, read live
        wait_until(lambda: 'job="later"' in scrape(port))
    finally:
        code = serve.stop(signal.SIGTERM)
    assert code == 0, serve.stderr()
    kinds = sorted(b["kind"] for b in receiver.bodies)
    assert kinds == ["job_failed", "loss_nan"]  # each once, critical only (the default level)
    assert all(b["text"].startswith("[critical] broken") for b in receiver.bodies)
    err = serve.stderr()
    port = receiver.server.server_address[1]
    assert f"posting critical alerts to http://127.0.0.1:{port}/… (URL from --notify)" in err
    assert "note: --notify's URL is in every user's `ps`" in err
    assert err.endswith("distmon: stopped\n")
    assert SECRET not in err and "pw" not in err


def test_notify_only_serve_stops_on_sigint_and_a_down_receiver_never_stops_it(
    tmp_path: Path,
) -> None:
    write_job(tmp_path, "bad", [1.0], status="diverged")
    serve = Serve(tmp_path, ["--notify", f"http://user:pw@127.0.0.1:9/{SECRET}", "--no-gpu",
                             str(tmp_path)])  # fmt: skip
    try:
        wait_until(lambda: "failed (" in serve.stderr())  # port 9 (discard) refuses: retried
        assert serve.proc.poll() is None
    finally:
        code = serve.stop(signal.SIGINT)
    assert code == 0
    err = serve.stderr()
    assert "notify: post to http://127.0.0.1:9/… failed" in err
    assert SECRET not in err and "pw@" not in err


def write_system(logdir: Path, job: str, utilization: Sequence[float], every: float = 60.0) -> None:
    """`<job>/system/worker-0` as distagent's recorder lays it out: each GPU's utilization, a
    point every `every` s up to now (fresh for 3 intervals: the test's whole length)."""
    from tensorboardX import SummaryWriter

    from distcore import names

    writer = SummaryWriter(str(logdir / job / "system" / "worker-0"))
    now = time.time()
    for step in range(3):
        for gpu, value in enumerate(utilization):
            wall = now - (2 - step) * every
            writer.add_scalar(names.gpu_tag(gpu, "utilization"), value, step, walltime=wall)
    writer.close()


def test_two_hosts_gpu_alerts_are_two_series_and_two_posts(
    tmp_path: Path, receiver: Receiver
) -> None:
    """Run-less alerts (a GPU rule's, on a host) keep their host in the key: two hosts with
    unevenly used GPUs are two `distmon_alert` series of a real scrape and two posts to a real
    receiver, never one hiding the other."""
    logdir = tmp_path / "logs"
    write_system(logdir, "a", [95.0, 10.0])
    write_system(logdir, "b", [90.0, 5.0])
    serve = Serve(tmp_path, ["--metrics", "0", "--notify", receiver.url, "--notify-level",
                             "warning", "--no-gpu", "--refresh", "0.5", str(logdir)])  # fmt: skip
    try:
        port = serve.port()

        def imbalanced() -> list[str]:
            from prometheus_client.parser import text_string_to_metric_families

            found = [s.labels["host"] for f in text_string_to_metric_families(scrape(port))
                     for s in f.samples if s.name == "distmon_alert"
                     and s.labels["kind"] == "gpu_imbalance"]  # fmt: skip
            return sorted(found) if len(found) == 2 else []

        assert wait_until(imbalanced) == ["a worker 0", "b worker 0"]
        text = scrape(port)
        # A host's alert names no job, run or GPU: those labels are absent, never empty.
        assert sample(text, "distmon_alert", host="a worker 0") == 1
        assert 'distmon_alert{host="a worker 0",kind="gpu_imbalance",severity="warning"}' in text
        assert sample(text, "distmon_series_dropped") == 0
        posted = lambda: sorted(b["host"] for b in receiver.bodies  # noqa: E731
                                if b["kind"] == "gpu_imbalance")  # fmt: skip
        assert wait_until(lambda: len(posted()) == 2 and posted()) == ["a worker 0", "b worker 0"]
    finally:
        code = serve.stop(signal.SIGTERM)
    assert code == 0, serve.stderr()
    assert len(posted()) == 2  # each once


def test_a_run_whose_events_file_was_deleted_is_no_longer_exported(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    job = write_job(logdir, "erased", [1.0 / (i + 1) for i in range(20)])
    write_job(logdir, "kept", [2.0, 1.0])
    serve = Serve(tmp_path, ["--metrics", "0", "--no-gpu", str(logdir)])
    try:
        port = serve.port()
        wait_until(lambda: {'run="erased/train"', 'run="kept/train"'} <= set(
            re.findall(r'run="[^"]*"', scrape(port))))
        for events in (job / "train").iterdir():
            events.unlink()
        wait_until(lambda: 'run="erased/train"' not in scrape(port))
        text = scrape(port)
        assert sample(text, "distmon_scalar", job="kept", run="kept/train", tag="loss") == 1.0
        assert sample(text, "distmon_job_status", job="erased", distmon_job_status="gone") == 1
    finally:
        assert serve.stop() == 0, serve.stderr()


def test_serve_waits_for_a_logdir_that_does_not_exist_yet_and_says_so(tmp_path: Path) -> None:
    logdir = tmp_path / "later"
    serve = Serve(tmp_path, ["--metrics", "0", "--no-gpu", str(logdir)])
    try:
        wait_until(lambda: f"waiting for {logdir} to be created" in serve.stderr())
        assert serve.proc.poll() is None
        write_job(logdir, "mnist", [1.0, 0.5, 0.25], status="running")
        port = serve.port()
        wait_until(lambda: 'run="mnist/train"' in scrape(port))
    finally:
        assert serve.stop() == 0
