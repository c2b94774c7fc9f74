"""A real two-worker job whose worker 1 gets slower, seen by `distmon --once --json`.

Both workers train a compute-bound model (tests/agent/straggler.py). While the job is healthy
distmon names no straggler. Then worker 1 gets SLOWDOWN times slower by two real causes in
turn, and distmon must name it within NAME_SECONDS each time: its input (its host's reads wait
SLOWDOWN - 1 times its measured time to gradients more per batch: the model's input layer reads
the delay from a file only that worker was told about), and, once that recovered and the alert
cleared, its CPU (stopped for a share of every 100 ms, as cgroup `cpu.max` throttles). Real
processes, gRPC, files and the distmon CLI; nothing faked.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from distagent.commands.launch_local import free_ports
from tests.agent.deep_model import SLOW_INPUT_ENV
from tests.agent.straggler import (
    CONFIG,
    OWN_CORE_ENV,
    SLOWDOWN,
    Throttle,
    Watch,
    until_clear,
    until_healthy,
    until_named,
)
from tests.agent.test_multiworker import child_env
from tests.agent.test_multiworker_hang import distmon_once

pytestmark = pytest.mark.slow


def start_workers(tmp_path: Path, slow_file: Path) -> list[subprocess.Popen[bytes]]:
    """Two `distagent start` workers; only worker 1 is told where its input delay is."""
    logdir = tmp_path / "runs"
    config = tmp_path / "straggler.toml"
    logdir.mkdir()
    config.write_text(CONFIG.format(logdir=logdir))
    addresses = json.dumps([f"127.0.0.1:{p}" for p in free_ports(2)])
    own = {**child_env(), **OWN_CORE_ENV}
    env = {0: own, 1: {**own, SLOW_INPUT_ENV: str(slow_file)}}
    procs = []
    for i in range(2):
        with open(tmp_path / f"worker-{i}.log", "w") as out:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distagent", "start", str(config), "--set",
                 f"cluster.workers={addresses}", "--task-index", str(i)],
                stdout=out, stderr=subprocess.STDOUT, env=env[i]))
    return procs


def watch_workers(tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> Watch:
    def output() -> str:
        return "".join((tmp_path / f"worker-{i}.log").read_text(errors="replace")[-3000:]
                       for i in range(2))

    return Watch(lambda: distmon_once(tmp_path / "runs"),
                 lambda: all(p.poll() is None for p in procs), output)


def test_distmon_names_the_worker_whose_input_or_cpu_got_slower(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    slow_file = tmp_path / "slow-input-ms"
    procs.extend(start_workers(tmp_path, slow_file))
    watch = watch_workers(tmp_path, procs)
    watch.until_scored(180)
    computes = [scores[1]["compute_seconds"] for scores in until_healthy(watch)]

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
