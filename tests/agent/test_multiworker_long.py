"""A two-worker `launch-local` job over many fast steps: threads that do not grow with the steps.

Real worker processes on 127.0.0.1; their threads are counted from outside, in the kernel's
list (/proc/PID/task: TensorFlow's threads too, which `threading` never sees).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from distcore import names
from tests.agent.test_multiworker import child_env

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")]

STEPS = 1500
CONFIG = """
[run]
name = "long"
logdir = "{logdir}"
[strategy]
kind = "multi_worker"
[data]
source = "synthetic"
per_replica_batch_size = 8
[data.synthetic]
num_examples = 256
num_classes = 4
input_shape = [8]
[model]
name = "mlp"
hidden_units = [16]
[train]
epochs = 1
steps_per_epoch = {steps}
log_every_steps = 50
checkpoint_every_steps = 0
[cluster]
timeout_seconds = 30
"""


def read_record(run_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((run_dir / names.RUN_JSON).read_text())
    except (OSError, ValueError):  # not written yet, or mid-replace
        return {}
    return data if isinstance(data, dict) else {}


def worker_threads(launcher: subprocess.Popen[bytes]) -> list[int]:
    """Each live worker's threads (the launcher's `distagent start` children)."""
    counts = []
    for child in psutil.Process(launcher.pid).children():
        try:
            if "--task-index" in child.cmdline():
                counts.append(len(os.listdir(f"/proc/{child.pid}/task")))
        except (OSError, psutil.Error):
            pass
    return counts


def test_threads_stay_bounded_over_many_steps(tmp_path: Path) -> None:
    """Fails with a per-collective timeout: ~4 threads per step per worker, ~6,000 at step 1,500."""
    config = tmp_path / "long.toml"
    config.write_text(CONFIG.format(logdir=tmp_path / "runs", steps=STEPS))
    run_dir = tmp_path / "runs" / "long"
    log = tmp_path / "launch.log"
    with open(log, "wb") as out:
        launcher = subprocess.Popen(
            [sys.executable, "-m", "distagent", "launch-local", str(config), "--workers", "2"],
            stdout=out, stderr=subprocess.STDOUT, env=child_env())
    try:
        seen: dict[int, list[int]] = {}  # step -> thread counts of both workers
        deadline = time.monotonic() + 240
        while launcher.poll() is None and time.monotonic() < deadline:
            step = read_record(run_dir).get("last_step")
            threads = worker_threads(launcher)
            if isinstance(step, int) and step not in seen and len(threads) == 2:
                seen[step] = threads
            time.sleep(0.2)
        assert launcher.wait(timeout=60) == 0, log.read_text(errors="replace")[-3000:]
    finally:
        if launcher.poll() is None:
            launcher.kill()
    record = read_record(run_dir)
    assert record["status"] == names.STATUS_FINISHED and record["last_step"] == STEPS
    early = [s for s in seen if 100 <= s <= 500]
    late = [s for s in seen if s >= STEPS - 500]
    assert early and late, seen
    first, last = seen[min(early)], seen[max(late)]
    print(f"threads per worker: {first} at step {min(early)}, {last} at step {max(late)}")
    assert all(b - a < 20 for a, b in zip(first, last, strict=True)), seen
    assert isinstance(record.get("threads"), int) and record["threads"] < 1000, record
