"""Straggler alerts on a real two-worker job: none while it is healthy, and how soon a worker
that got slower is named.

Two `distagent start` workers (one intra-op thread each, as on hosts of their own) train
tests/agent/deep_model.py's compute-bound model while `distmon --once --json` polls them every
`--poll-seconds`. Healthy phase, `--minutes` (default 10): the number of polls that raised a
straggler alert (target 0) and the spread of the workers' compute ratio (slowest over fastest;
an alert needs 1.2). Slowed phase: worker 1 gets `--slowdown` times slower (default
1.3) by two causes in turn, and the seconds until distmon names it (target <= 30 s each): its
input (each batch waits `--slowdown` - 1 times its healthy time to gradients more), then, once
that recovered and the alert cleared, its CPU (stopped for 1 - 1/slowdown of every 100 ms, as
cgroup `cpu.max` throttles). Exits 1 when a target is missed.

Run: .venv/bin/python bench/straggler.py [--minutes 10] [--slowdown 1.3] [--poll-seconds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NAME_TARGET_SECONDS = 30.0
WARMUP_SECONDS = 15.0
"""After both workers are scored, or an alert cleared: their heartbeats' windows (10 s,
perf_window.py) hold only what came after."""
SLOW_INPUT_ENV = "DISTMON_TEST_SLOW_INPUT_FILE"  # tests/agent/deep_model.py's (it imports TF)
STEPS = 10_000_000
"""The tests' job (tests/agent/straggler.py), with room for a healthy phase of any length."""


def start_workers(workdir: Path, slow_file: Path) -> list[subprocess.Popen[bytes]]:
    from distagent.commands.launch_local import free_ports
    from tests.agent.straggler import CONFIG

    (workdir / "runs").mkdir()
    config = workdir / "straggler.toml"
    config.write_text(CONFIG.format(logdir=workdir / "runs"))
    addresses = json.dumps([f"127.0.0.1:{p}" for p in free_ports(2)])
    base = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    base.update(TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS="1", PYTHONPATH=os.pathsep.join(
        [str(ROOT), str(ROOT / "shared"), str(ROOT / "agent"), os.environ.get("PYTHONPATH", "")]))
    procs = []
    for i in range(2):
        env = {**base, SLOW_INPUT_ENV: str(slow_file)} if i == 1 else base
        with open(workdir / f"worker-{i}.log", "wb") as out:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distagent", "start", str(config), "--set",
                 f"cluster.workers={addresses}", "--set", f"train.steps_per_epoch={STEPS}",
                 "--task-index", str(i)],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT))
    return procs


def poll(workdir: Path, procs: list[subprocess.Popen[bytes]]) -> tuple[dict[int, Any], list[str]]:
    """Each scored worker's score and the straggler alerts' messages, from one distmon run."""
    for i, proc in enumerate(procs):
        if proc.poll() is not None:
            tail = (workdir / f"worker-{i}.log").read_text(errors="replace")[-2000:]
            raise SystemExit(f"worker {i} exited {proc.returncode}:\n{tail}")
    done = subprocess.run(
        [sys.executable, "-m", "distmon", "--once", "--json", "--no-gpu", str(workdir / "runs")],
        capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"distmon: {done.stderr[-2000:]}")
    doc = json.loads(done.stdout)
    workers = (doc["jobs"][0].get("workers") or []) if doc["jobs"] else []
    scores = {w["worker"]: w["score"] for w in workers if w.get("score")}
    return scores, [a["message"] for a in doc["alerts"] if a["kind"] == "straggler"]


def ratio(scores: dict[int, Any]) -> float:
    computes = [s["compute_seconds"] for s in scores.values()]
    return max(computes) / min(computes)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def healthy(workdir: Path, procs: list[subprocess.Popen[bytes]], args: argparse.Namespace
            ) -> tuple[int, list[float], list[float]]:
    """(polls with a straggler alert, the compute ratios, worker 1's compute seconds)."""
    deadline = time.monotonic() + 240
    while len(poll(workdir, procs)[0]) < 2:
        if time.monotonic() > deadline:
            raise SystemExit("no score for both workers in 240 s")
        time.sleep(args.poll_seconds)
    time.sleep(WARMUP_SECONDS)
    alerted, ratios, computes = 0, [], []
    end = time.monotonic() + args.minutes * 60
    while time.monotonic() < end:
        scores, alerts = poll(workdir, procs)
        if alerts:
            alerted += 1
            print(f"  healthy, alert: {alerts[0]}", flush=True)
        ratios.append(ratio(scores))
        computes.append(scores[1]["compute_seconds"])
        time.sleep(args.poll_seconds)
    return alerted, ratios, computes


class Throttle:
    """A process stopped for `share` of every 100 ms (SIGSTOP, SIGCONT), as cgroup `cpu.max`
    throttles its CPU, by a thread, until closed."""

    def __init__(self, pid: int, share: float) -> None:
        self.pid, self.share = pid, share
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            os.kill(self.pid, signal.SIGSTOP)
            try:
                self._done.wait(0.1 * self.share)
            finally:
                os.kill(self.pid, signal.SIGCONT)
            self._done.wait(0.1 * (1.0 - self.share))

    def close(self) -> None:
        self._done.set()
        self._thread.join()


def time_to_name(workdir: Path, procs: list[subprocess.Popen[bytes]],
                 args: argparse.Namespace) -> float | None:
    """Seconds from now until distmon names worker 1 (None: not in 3x the target)."""
    start = time.monotonic()
    while time.monotonic() - start < 3 * NAME_TARGET_SECONDS:
        _, alerts = poll(workdir, procs)
        if any(a.startswith("worker 1 ") for a in alerts):
            print(f"  named: {alerts[0]}", flush=True)
            return time.monotonic() - start
        time.sleep(args.poll_seconds)
    return None


def until_clear(workdir: Path, procs: list[subprocess.Popen[bytes]],
                args: argparse.Namespace) -> None:
    """Until no alert for a whole heartbeat window (10 s): the slow intervals have left it."""
    clear_since = None
    while clear_since is None or time.monotonic() - clear_since < WARMUP_SECONDS:
        if poll(workdir, procs)[1]:
            clear_since = None
        elif clear_since is None:
            clear_since = time.monotonic()
        time.sleep(args.poll_seconds)


def slowed(workdir: Path, procs: list[subprocess.Popen[bytes]], slow_file: Path,
           delay_ms: float, args: argparse.Namespace) -> dict[str, float | None]:
    """Seconds to name worker 1: its input slower, then (recovered) its CPU throttled."""
    slow_file.write_text(f"{delay_ms:.2f}")
    named = {"input": time_to_name(workdir, procs, args)}
    slow_file.write_text("0")
    until_clear(workdir, procs, args)
    throttle = Throttle(procs[1].pid, 1.0 - 1.0 / args.slowdown)
    try:
        named["cpu"] = time_to_name(workdir, procs, args)
    finally:
        throttle.close()
    return named


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="healthy phase (default 10)")
    parser.add_argument("--slowdown", type=float, default=1.3,
                        help="worker 1's time to gradients after, over before (default 1.3)")
    parser.add_argument("--poll-seconds", type=float, default=2.0)
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "shared"), str(ROOT / "agent")]
    with tempfile.TemporaryDirectory(prefix="distmon-bench-straggler-") as tmp:
        workdir = Path(tmp)
        slow_file = workdir / "slow-input-ms"
        procs = start_workers(workdir, slow_file)
        try:
            alerted, ratios, computes = healthy(workdir, procs, args)
            delay_ms = (args.slowdown - 1.0) * statistics.median(computes) * 1e3
            named = slowed(workdir, procs, slow_file, delay_ms, args)
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()
    print(f"healthy {args.minutes:g} min, {len(ratios)} polls: {alerted} with a straggler alert "
          f"(target 0); compute ratio slowest/fastest median {statistics.median(ratios):.3f}, "
          f"p95 {quantile(ratios, 0.95):.3f}, max {max(ratios):.3f} (an alert needs 1.2)")
    shown = {cause: "not named" if s is None else f"named after {s:.1f} s"
             for cause, s in named.items()}
    print(f"slowed {args.slowdown:g}x: input +{delay_ms:.1f} ms a batch on worker 1 "
          f"{shown['input']}; its CPU throttled to {1 / args.slowdown:.0%} {shown['cpu']} "
          f"(target <= {NAME_TARGET_SECONDS:g} s); load average {os.getloadavg()[0]:.1f}")
    met = all(s is not None and s <= NAME_TARGET_SECONDS for s in named.values())
    return 0 if alerted == 0 and met else 1


if __name__ == "__main__":
    sys.exit(main())
