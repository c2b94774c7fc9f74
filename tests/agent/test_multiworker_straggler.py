"""A real two-worker job whose worker 1 gets slower, seen by `distmon --once --json`.

Both workers train a compute-bound model (tests/agent/deep_model.py: a reduction of a few
kilobytes, so a step is mostly each worker's own input, forward and backward pass). While the
job is healthy distmon names no straggler. Then worker 1 gets SLOWDOWN times slower by two real
causes in turn, and distmon must name it within NAME_SECONDS each time: its input (its host's
reads wait SLOWDOWN - 1 times its measured time to gradients more per batch: the model's input
layer reads the delay from a file only that worker was told about), and, once that recovered
and the alert cleared, its CPU (stopped for a share of every 100 ms, as cgroup `cpu.max`
throttles). Real processes, gRPC, files and the distmon CLI; nothing faked.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from distagent.commands.launch_local import free_ports
from distagent.train.perf_window import WINDOW_SECONDS
from tests.agent.deep_model import SLOW_INPUT_ENV
from tests.agent.test_multiworker import child_env
from tests.agent.test_multiworker_hang import distmon_once

pytestmark = pytest.mark.slow

SLOWDOWN = 1.5
"""Worker 1's time to its gradients after, over before: well clear of the 1.2x threshold, so
another job's load on a shared machine does not decide the test (bench/straggler.py measures
the 1.3x case)."""
NAME_SECONDS = 30.0
HEALTHY_SECONDS = 15.0
"""How long the healthy job is watched once both workers' heartbeats carry a full window."""
POLL_SECONDS = 1.0

CONFIG = """
[run]
name = "straggler"
logdir = "{logdir}"
[strategy]
kind = "multi_worker"
[data]
source = "synthetic"
per_replica_batch_size = 512
validation_fraction = 0.0
[data.synthetic]
num_examples = 4096
num_classes = 4
input_shape = [32]
[model]
name = "tests.agent.deep_model:deep_narrow"
[train]
epochs = 1
steps_per_epoch = 100000
log_every_steps = 10
steps_per_execution = 5
checkpoint_every_steps = 0
[cluster]
timeout_seconds = 60
"""


def start_workers(tmp_path: Path, slow_file: Path) -> list[subprocess.Popen[bytes]]:
    """Two `distagent start` workers; only worker 1 is told where its input delay is."""
    logdir = tmp_path / "runs"
    config = tmp_path / "straggler.toml"
    logdir.mkdir()
    config.write_text(CONFIG.format(logdir=logdir))
    addresses = json.dumps([f"127.0.0.1:{p}" for p in free_ports(2)])
    # One intra-op thread each, as on a host of its own: two workers on one machine's cores
    # otherwise take them from each other, and the one that waits lends the other its core.
    own = {**child_env(), "TF_NUM_INTRAOP_THREADS": "1"}
    env = {0: own, 1: {**own, SLOW_INPUT_ENV: str(slow_file)}}
    procs = []
    for i in range(2):
        with open(tmp_path / f"worker-{i}.log", "w") as out:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distagent", "start", str(config), "--set",
                 f"cluster.workers={addresses}", "--task-index", str(i)],
                stdout=out, stderr=subprocess.STDOUT, env=env[i]))
    return procs


class Watch:
    """distmon's view of the job, polled; the straggler alerts it raised."""

    def __init__(self, tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> None:
        self.tmp_path, self.procs = tmp_path, procs

    def log(self, i: int) -> str:
        return (self.tmp_path / f"worker-{i}.log").read_text(errors="replace")[-3000:]

    def poll(self) -> tuple[dict[int, dict[str, Any]], list[str]]:
        """Each worker's straggler score (those that have one) and the straggler messages."""
        assert all(p.poll() is None for p in self.procs), self.log(0) + self.log(1)
        doc = distmon_once(self.tmp_path / "runs")
        jobs = doc["jobs"]
        workers = (jobs[0].get("workers") or []) if jobs else []
        scores = {w["worker"]: w["score"] for w in workers if w.get("score")}
        return scores, [a["message"] for a in doc["alerts"] if a["kind"] == "straggler"]

    def until_scored(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            scores, _ = self.poll()
            if len(scores) == 2:
                return
            time.sleep(POLL_SECONDS)
        raise AssertionError(f"no score for both workers in {timeout} s\n" + self.log(1))


def show(scores: dict[int, dict[str, Any]]) -> str:
    return " | ".join(f"worker {i}: compute {s['compute_seconds'] * 1e3:.1f} ms, reduce "
                      f"{s['reduce_wait_seconds'] * 1e3:.1f} ms, step "
                      f"{s['step_seconds'] * 1e3:.1f} ms" for i, s in sorted(scores.items()))


def until_named(watch: Watch, cause: str) -> None:
    """Poll until distmon names worker 1 (never worker 0), within NAME_SECONDS."""
    start = time.monotonic()
    while True:
        scores, alerts = watch.poll()
        waited = time.monotonic() - start
        assert not any(a.startswith("worker 0 ") for a in alerts), alerts
        if any(a.startswith("worker 1 ") for a in alerts):
            print(f"{cause}: named after {waited:.1f} s:", alerts[0], "|", show(scores))
            return
        assert waited < NAME_SECONDS, f"{cause}: not named in {NAME_SECONDS} s: {show(scores)}"
        time.sleep(POLL_SECONDS)


def until_clear(watch: Watch, timeout: float) -> None:
    """Poll until no straggler alert for a whole heartbeat window: the recovered worker's
    slow intervals have left it, so what comes next is named for its own cause."""
    deadline = time.monotonic() + timeout
    clear_since = None
    while clear_since is None or time.monotonic() - clear_since < WINDOW_SECONDS:
        scores, alerts = watch.poll()
        assert time.monotonic() < deadline, f"straggler alert for {timeout} s: {show(scores)}"
        if alerts:
            clear_since = None
        elif clear_since is None:
            clear_since = time.monotonic()
        time.sleep(POLL_SECONDS)


class Throttle:
    """A process's CPU throttled as cgroup `cpu.max` does it: stopped for `share` of every
    PERIOD_SECONDS (SIGSTOP, then SIGCONT), by a thread, until closed."""

    PERIOD_SECONDS = 0.1

    def __init__(self, pid: int, share: float) -> None:
        self.pid, self.share = pid, share
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="throttle", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            os.kill(self.pid, signal.SIGSTOP)
            try:
                self._done.wait(self.PERIOD_SECONDS * self.share)
            finally:
                os.kill(self.pid, signal.SIGCONT)
            self._done.wait(self.PERIOD_SECONDS * (1.0 - self.share))

    def close(self) -> None:
        self._done.set()
        self._thread.join()


def test_distmon_names_the_worker_whose_input_or_cpu_got_slower(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    slow_file = tmp_path / "slow-input-ms"
    procs.extend(start_workers(tmp_path, slow_file))
    watch = Watch(tmp_path, procs)
    watch.until_scored(180)

    # Healthy: no straggler, once the windows have filled and while the job runs on.
    computes: list[float] = []
    healthy_until = time.monotonic() + HEALTHY_SECONDS + 10.0  # + the window's first fill
    while time.monotonic() < healthy_until:
        scores, alerts = watch.poll()
        assert not alerts, (alerts, show(scores))
        computes.append(scores[1]["compute_seconds"])
        time.sleep(POLL_SECONDS)
    print("healthy:", show(scores))

    # Worker 1's input slows: each batch waits (SLOWDOWN - 1) x its time to gradients more.
    delay_ms = (SLOWDOWN - 1.0) * statistics.median(computes[len(computes) // 2:]) * 1e3
    slow_file.write_text(f"{delay_ms:.2f}")
    until_named(watch, f"input +{delay_ms:.1f} ms a batch")

    # Its input recovers, and the alert clears; then its CPU is throttled to 1 / SLOWDOWN.
    slow_file.write_text("0")
    until_clear(watch, 60)
    throttle = Throttle(procs[1].pid, 1.0 - 1.0 / SLOWDOWN)
    try:
        until_named(watch, f"CPU throttled to {1 / SLOWDOWN:.0%}")
    finally:
        throttle.close()
