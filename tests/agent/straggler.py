"""A two-worker job whose worker 1 gets slower, watched through distmon: the job, the watch and
the causes that the straggler tests share (tests/agent/test_multiworker_straggler.py starts the
workers itself, tests/agent/test_slurm_straggler.py through sbatch and srun).

Both workers train a compute-bound model (tests/agent/deep_model.py: a reduction of a few
kilobytes, so a step is mostly each worker's own input, forward and backward pass). The causes
are real: a slower input (the model's input layer reads a delay from a file only worker 1 was
told about) or a throttled CPU (the process stopped for a share of every 100 ms, as cgroup
`cpu.max` throttles).
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from distagent.train.perf_window import WINDOW_SECONDS

SLOWDOWN = 1.5
"""Worker 1's time to its gradients after, over before: well clear of the 1.2x threshold, so
another job's load on a shared machine does not decide the test (bench/straggler.py measures
the 1.3x case)."""
NAME_SECONDS = 30.0
HEALTHY_SECONDS = 15.0
"""How long the healthy job is watched once both workers' heartbeats carry a full window."""
POLL_SECONDS = 1.0
FIGURE = re.compile(r"its steps take (\d+(?:\.\d+)?)x worker ")

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
OWN_CORE_ENV = {"TF_NUM_INTRAOP_THREADS": "1"}
"""One intra-op thread each, as on a host of its own: two workers on one machine's cores
otherwise take them from each other, and the one that waits lends the other its core."""

Scores = dict[int, dict[str, Any]]


class Watch:
    """distmon's view of the job, polled (`ask` runs `distmon --once --json`); the straggler
    alerts it raised. `running` says whether the job still runs, `output` its workers' last
    lines for a failure's message."""

    def __init__(self, ask: Callable[[], dict[str, Any]], running: Callable[[], bool],
                 output: Callable[[], str]) -> None:
        self.ask, self.running, self.output = ask, running, output

    def poll(self) -> tuple[Scores, list[str]]:
        """Each worker's straggler score (those that have one) and the straggler messages."""
        assert self.running(), self.output()
        doc = self.ask()
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
        raise AssertionError(f"no score for both workers in {timeout} s\n" + self.output())


def show(scores: Scores) -> str:
    return " | ".join(f"worker {i}: compute {s['compute_seconds'] * 1e3:.1f} ms, reduce "
                      f"{s['reduce_wait_seconds'] * 1e3:.1f} ms, step "
                      f"{s['step_seconds'] * 1e3:.1f} ms" for i, s in sorted(scores.items()))


def until_healthy(watch: Watch, seconds: float = HEALTHY_SECONDS) -> list[Scores]:
    """Poll for `seconds` once the windows have filled: no straggler named while the job runs
    on healthy. The scores of every poll."""
    seen: list[Scores] = []
    healthy_until = time.monotonic() + seconds + WINDOW_SECONDS  # + the window's first fill
    while time.monotonic() < healthy_until:
        scores, alerts = watch.poll()
        assert not alerts, (alerts, show(scores))
        seen.append(scores)
        time.sleep(POLL_SECONDS)
    print("healthy:", show(seen[-1]))
    return seen


def until_named(watch: Watch, cause: str) -> tuple[str, float]:
    """Poll until distmon names worker 1 (never worker 0), within NAME_SECONDS: its alert and
    how long it took."""
    start = time.monotonic()
    while True:
        scores, alerts = watch.poll()
        waited = time.monotonic() - start
        assert not any(a.startswith("worker 0 ") for a in alerts), alerts
        named = [a for a in alerts if a.startswith("worker 1 ")]
        if named:
            print(f"{cause}: named after {waited:.1f} s:", named[0], "|", show(scores))
            return named[0], waited
        assert waited < NAME_SECONDS, f"{cause}: not named in {NAME_SECONDS} s: {show(scores)}"
        time.sleep(POLL_SECONDS)


def figure(alert: str) -> float:
    """How many times the fastest worker's steps the straggler's take, as the alert says."""
    found = FIGURE.search(alert)
    assert found, alert
    return float(found.group(1))


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
