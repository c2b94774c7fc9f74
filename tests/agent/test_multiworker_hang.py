"""A real two-worker job that hangs on worker 1, seen by `distmon --once --json`.

Worker 1 gets stuck in the user's model (tests/agent/stuck_model.py: a layer that blocks in
Python after a few steps, in that worker only) while worker 0 holds its gradients and waits in
the reduction. Both find the job hung after `cluster.hang_seconds` and write their stacks
(worker 1's shows the user's function); distmon names worker 1 as the one that never reached
the reduction. Then worker 1 is stopped (SIGSTOP): its heartbeat stops,
and distmon names it for that. Real processes, gRPC, files and the distmon CLI; nothing faked.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distagent.commands.launch_local import free_ports
from distcore import names
from tests.agent.stuck_model import STUCK_AFTER_ENV, STUCK_JOB
from tests.agent.test_multiworker import child_env
from tests.json_shape import undocumented
from tests.kit.wait import wait_until

pytestmark = pytest.mark.slow



def distmon_once(logdir: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "distmon", "--once", "--json", "--no-gpu", str(logdir)],
        capture_output=True, text=True, timeout=60, env=child_env())
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert isinstance(doc, dict)
    assert undocumented(doc) == [], "keys docs/watching.md does not publish"
    return doc


def hung_message(doc: dict[str, Any]) -> str:
    return " | ".join(a["message"] for a in doc["alerts"] if a["kind"] == "hung")


def poll(check: Callable[[], Any], timeout: float, what: str) -> Any:
    return wait_until(check, what, timeout, every=0.3)


def test_distmon_names_the_worker_that_holds_a_hung_job(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    logdir = tmp_path / "runs"
    config = tmp_path / "hang.toml"
    logdir.mkdir()
    config.write_text(STUCK_JOB.format(name="hang", logdir=logdir, timeout_seconds=120,
                                       hang_seconds=3, on_hang="warn"))
    addresses = json.dumps([f"127.0.0.1:{p}" for p in free_ports(2)])
    stuck = {0: {}, 1: {STUCK_AFTER_ENV: "6"}}  # worker 1's layer blocks in its 7th step
    for i in range(2):
        with open(tmp_path / f"worker-{i}.log", "w") as out:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distagent", "start", str(config), "--set",
                 f"cluster.workers={addresses}", "--task-index", str(i)],
                stdout=out, stderr=subprocess.STDOUT, env={**child_env(), **stuck[i]}))
    run_dir = logdir / "hang"

    def log(i: int) -> str:
        return (tmp_path / f"worker-{i}.log").read_text(errors="replace")[-3000:]

    def named(text: str) -> Callable[[], str]:
        def check() -> str:
            assert all(p.poll() is None for p in procs), log(0) + log(1)
            message = hung_message(distmon_once(logdir))
            return message if text in message else ""
        return check

    message = poll(named("2 stack dumps"), 150, "hung alert with both workers' stacks")
    assert "worker 1 never reached the reduction" in message, message
    assert "worker 0 waits for it" in message, message
    for i in range(2):  # both live workers wrote their stacks, and distmon shows where
        assert f"{run_dir}/{names.stacks_name(i)}" in message, message
        stacks = (run_dir / names.stacks_name(i)).read_text()
        assert "Thread" in stacks and "distagent/train/loop.py" in stacks, stacks[:2000]
    assert "in wait_for_the_remote_service" in (run_dir / names.stacks_name(1)).read_text()
    job = distmon_once(logdir)["jobs"][0]
    assert {w["worker"]: w["phase"] for w in job["workers"]} == {0: "reducing", 1: "computing"}
    assert job["status"] == names.STATUS_RUNNING
    assert job["workers"][0]["stacks"] == str(run_dir / names.stacks_name(0))

    # Worker 1 stops answering altogether: its heartbeat stops, and distmon says so.
    procs[1].send_signal(signal.SIGSTOP)
    message = poll(named("worker 1's heartbeat stopped"), 60, "stopped heartbeat")
    assert "worker 0 waits for it" in message


def test_a_frozen_chief_ends_the_other_worker_within_the_timeout(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """The chief stopped (SIGSTOP) fails nothing in TensorFlow (its coordination service is
    what would): worker 1 writes its stacks and leaves, naming the chief, in one line."""
    logdir = tmp_path / "runs"
    config = tmp_path / "frozen.toml"
    config.write_text(STUCK_JOB.format(name="frozen", logdir=logdir, timeout_seconds=5,
                                       hang_seconds=3, on_hang="warn")
                      .replace("steps_per_epoch = 400", "steps_per_epoch = 100000"))
    addresses = json.dumps([f"127.0.0.1:{p}" for p in free_ports(2)])
    for i in range(2):
        with open(tmp_path / f"worker-{i}.log", "w") as out:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distagent", "start", str(config), "--set",
                 f"cluster.workers={addresses}", "--task-index", str(i)],
                stdout=out, stderr=subprocess.STDOUT, env=child_env()))
    run_dir = logdir / "frozen"

    def stepping() -> bool:
        assert all(p.poll() is None for p in procs)
        try:
            return int(json.loads((run_dir / names.RUN_JSON).read_text())["last_step"]) > 5
        except (OSError, ValueError, KeyError, TypeError):
            return False

    poll(stepping, 150, "steps")
    procs[0].send_signal(signal.SIGSTOP)
    assert procs[1].wait(timeout=150) == 1
    log = (tmp_path / "worker-1.log").read_text(errors="replace")
    last = log.strip().splitlines()[-1]
    # Its heartbeat check or TensorFlow's own coordination deadline, whichever comes first.
    assert last.startswith("distagent: worker 1") and "lost worker 0" in last, log[-3000:]
    # Stacks are written where distagent's own hang check comes first; TensorFlow's coordination
    # deadline can come before it on a loaded machine, and ends the worker as well.
    assert "Traceback" not in log
