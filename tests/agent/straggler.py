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
from distcore.alerts.stragglers import WorkerScore, find_straggler
from tests.kit.wait import wait_until

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
        wait_until(lambda: len(self.poll()[0]) == 2, "a score for both workers", timeout,
                   every=POLL_SECONDS, detail=self.output)


def show(scores: Scores) -> str:
    return " | ".join(f"worker {i}: compute {s['compute_seconds'] * 1e3:.1f} ms, reduce "
                      f"{s['reduce_wait_seconds'] * 1e3:.1f} ms, step "
                      f"{s['step_seconds'] * 1e3:.1f} ms" for i, s in sorted(scores.items()))


def until_healthy(watch: Watch, seconds: float = HEALTHY_SECONDS) -> list[Scores]:
    """Poll for `seconds` once the windows have filled, while the job runs on healthy; the
    scores of every poll.

    Healthy is not equal on a shared machine: another job's load can leave one worker 1.2x
    slower for a window, and then distmon is right to name it. So an alert here must be one
    the scores it came with call for (the rule, applied to them), and the job must run
    unnamed for most of the span: a detector that names healthy workers by habit fails."""
    seen: list[Scores] = []
    named: list[str] = []
    healthy_until = time.monotonic() + seconds + WINDOW_SECONDS  # + the window's first fill
    while time.monotonic() < healthy_until:
        scores, alerts = watch.poll()
        if alerts:
            assert warranted(scores), (alerts, show(scores))
            named.append(f"{alerts} at {show(scores)}")
        seen.append(scores)
        # Time passing is the point here: the whole span is watched.
        time.sleep(POLL_SECONDS)
    print("healthy:", show(seen[-1]), "| named under load:", named)
    assert len(named) <= len(seen) // 3, named
    return seen


def warranted(scores: Scores) -> bool:
    """The straggler rule finds one in these scores, as distmon showed them."""
    found = find_straggler([
        WorkerScore(s["worker"], s.get("host"), s["compute_seconds"], s["reduce_wait_seconds"],
                    s["step_seconds"], s["relative"], s.get("own"), s.get("window_steps"))
        for s in scores.values()])
    return found is not None


def until_named(watch: Watch, cause: str) -> tuple[str, float]:
    """Poll until distmon names worker 1 (never worker 0), within NAME_SECONDS: its alert and
    how long it took."""
    start = time.monotonic()
    last: list[Scores] = [{}]

    def named() -> str | None:
        scores, alerts = watch.poll()
        last[0] = scores
        assert not any(a.startswith("worker 0 ") for a in alerts), alerts
        return next((a for a in alerts if a.startswith("worker 1 ")), None)

    alert = wait_until(named, f"{cause}: worker 1 named", NAME_SECONDS, every=POLL_SECONDS,
                       detail=lambda: show(last[0]))
    waited = time.monotonic() - start
    print(f"{cause}: named after {waited:.1f} s:", alert, "|", show(last[0]))
    return alert, waited


def figure(alert: str) -> float:
    """How many times the fastest worker's steps the straggler's take, as the alert says."""
    found = FIGURE.search(alert)
    assert found, alert
    return float(found.group(1))


def until_clear(watch: Watch, timeout: float) -> None:
    """Poll until no straggler alert for a whole heartbeat window: the recovered worker's
    slow intervals have left it, so what comes next is named for its own cause."""
    clear_since: list[float | None] = [None]
    last: list[Scores] = [{}]

    def clear_for_a_window() -> bool:
        last[0], alerts = watch.poll()
        if alerts:
            clear_since[0] = None
        elif clear_since[0] is None:
            clear_since[0] = time.monotonic()
        since = clear_since[0]
        return since is not None and time.monotonic() - since >= WINDOW_SECONDS

    wait_until(clear_for_a_window, "no straggler alert for a whole window", timeout,
               every=POLL_SECONDS, detail=lambda: show(last[0]))


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
