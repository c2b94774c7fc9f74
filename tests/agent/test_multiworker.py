"""Multi-worker training with real worker processes on 127.0.0.1 (one CPU device each).

Every test here starts real `distagent` processes that talk gRPC to each other; nothing is
faked. They are slow (TensorFlow starts in each worker), so they keep the model, the data and
the step counts tiny.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from distagent.commands.launch_local import free_ports
from distcore import names

pytestmark = pytest.mark.slow

TIMEOUT_SECONDS = 15
DIGEST = re.compile(r"worker (\d+) \(.*\): (\w+); weights digest ([0-9a-f]+)")

CONFIG = """
[run]
name = "mw"
logdir = "{logdir}"
[strategy]
kind = "multi_worker"
[data]
source = "synthetic"
per_replica_batch_size = 16
[data.synthetic]
num_examples = 640
num_classes = 4
input_shape = [8]
read_latency_ms = {latency}
[model]
name = "mlp"
[optimizer]
warmup_epochs = 0.5
[train]
epochs = 2
steps_per_epoch = {steps}
log_every_steps = 2
checkpoint_every_steps = 4
[cluster]
timeout_seconds = {timeout}
"""


def write_config(tmp_path: Path, *, steps: int, latency: float = 0.0) -> Path:
    path = tmp_path / "mw.toml"
    path.write_text(CONFIG.format(logdir=tmp_path / "runs", steps=steps, latency=latency,
                                  timeout=TIMEOUT_SECONDS))
    return path


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def digests(output: str) -> dict[int, tuple[str, str]]:
    return {int(i): (status, d) for i, status, d in DIGEST.findall(output)}


class Cluster:
    """Two `distagent start --task-index I` processes on fresh loopback ports."""

    def __init__(self, config: Path, tmp_path: Path, extra: Sequence[str] = ()) -> None:
        ports = free_ports(2)
        self.addresses = [f"127.0.0.1:{p}" for p in ports]
        overrides = ["--set", f"cluster.workers={json.dumps(self.addresses)}"]
        for item in extra:
            overrides += ["--set", item]
        self.logs = [tmp_path / f"worker-{i}-{ports[0]}.log" for i in range(2)]
        self.procs = []
        for i, log in enumerate(self.logs):
            with open(log, "w") as out:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "distagent", "start", str(config), *overrides,
                     "--task-index", str(i)],
                    stdout=out, stderr=subprocess.STDOUT, env=child_env(),
                ))

    def wait(self, index: int, timeout: float) -> int:
        return self.procs[index].wait(timeout=timeout)

    def output(self, index: int) -> str:
        return self.logs[index].read_text(errors="replace")

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def clusters() -> Iterator[list[Cluster]]:
    made: list[Cluster] = []
    yield made
    for cluster in made:
        cluster.kill()


def wait_for_checkpoint_after(run_dir: Path, step: int, procs: Sequence[subprocess.Popen[bytes]],
                              timeout: float = 180.0) -> int:
    """The step of the chief's newest checkpoint, once it is past `step`."""
    deadline = time.monotonic() + timeout
    state = run_dir / names.CHECKPOINT_DIR / "checkpoint"
    while time.monotonic() < deadline:
        assert all(p.poll() is None for p in procs), "a worker exited before checkpointing"
        if state.exists():
            match = re.search(r'^model_checkpoint_path: "ckpt-(\d+)"', state.read_text(), re.M)
            if match and int(match.group(1)) > step:
                return int(match.group(1))
        time.sleep(0.2)
    raise AssertionError(f"no checkpoint past step {step} in {timeout} s")


def run_json(run_dir: Path) -> dict[str, object]:
    data = json.loads((run_dir / names.RUN_JSON).read_text())
    assert isinstance(data, dict)
    return data


def scalar_tags(path: Path) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(path), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    return set(acc.Tags()["tensors"]) | set(acc.Tags()["scalars"])


def test_launch_local_two_workers_train_in_sync(tmp_path: Path) -> None:
    config = write_config(tmp_path, steps=4)
    result = subprocess.run(
        [sys.executable, "-m", "distagent", "launch-local", str(config), "--workers", "2"],
        capture_output=True, text=True, env=child_env(), timeout=240,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    final = digests(out)
    assert set(final) == {0, 1}, out[-3000:]
    assert final[0] == final[1] and final[0][0] == names.STATUS_FINISHED
    run_dir = tmp_path / "runs" / "mw"
    record = run_json(run_dir)
    assert record["status"] == names.STATUS_FINISHED and record["last_step"] == 8
    plan = record["plan"]
    assert isinstance(plan, dict)
    assert (plan["workers"], plan["replicas"], plan["global_batch_size"]) == (2, 2, 32)
    # Both workers share this host's cores: its measured peak counts once, not per worker.
    assert plan["peak_devices"] == 1 and plan["peak_source"].startswith("measured")
    # Only the chief writes training events; every worker writes its own system samples.
    assert set(names.TRAINING_TAGS) <= scalar_tags(run_dir / names.TRAIN_DIR)
    assert len(list((run_dir / names.TRAIN_DIR).glob("*tfevents*"))) == 1
    for i in range(2):
        assert list((run_dir / names.worker_system_dir(i)).glob("*tfevents*")), i
    assert not list((run_dir / names.SYSTEM_DIR).glob("*tfevents*"))  # no unlabelled worker


def latest_checkpoint_step(run_dir: Path) -> int:
    state = (run_dir / names.CHECKPOINT_DIR / "checkpoint").read_text()
    match = re.search(r'^model_checkpoint_path: "ckpt-(\d+)"', state, re.M)
    assert match, state
    return int(match.group(1))


def test_kill_fails_the_other_restart_resumes_sigterm_stops_all(
    tmp_path: Path, clusters: list[Cluster]
) -> None:
    config = write_config(tmp_path, steps=60, latency=1.0)
    run_dir = tmp_path / "runs" / "mw"

    # kill -9 a worker: the other fails within the timeout, naming the lost worker.
    first = Cluster(config, tmp_path)
    clusters.append(first)
    wait_for_checkpoint_after(run_dir, 0, first.procs)
    first.procs[1].kill()
    killed_at = time.monotonic()
    assert first.wait(0, timeout=TIMEOUT_SECONDS + 60) == 1
    assert time.monotonic() - killed_at < TIMEOUT_SECONDS + 30
    last_line = first.output(0).strip().splitlines()[-1]
    assert f"lost worker 1 (worker:1 at {first.addresses[1]})" in last_line, last_line
    assert "Traceback" not in first.output(0)
    assert run_json(run_dir)["status"] == names.STATUS_FAILED
    assert "lost worker 1 (worker:1 at " in str(run_json(run_dir)["error"])  # the line, not gRPC's
    checkpointed = latest_checkpoint_step(run_dir)

    # Start again: both resume from the last checkpoint.
    second = Cluster(config, tmp_path)
    clusters.append(second)
    wait_for_checkpoint_after(run_dir, checkpointed, second.procs)
    assert f"from step {checkpointed} " in second.output(0), second.output(0)[-2000:]

    # SIGTERM to the non-chief: both agree on a step, checkpoint there and stop (exit 0).
    second.procs[1].send_signal(signal.SIGTERM)
    codes = [second.wait(i, timeout=120) for i in range(2)]
    assert codes == [0, 0], second.output(0)[-2000:] + second.output(1)[-2000:]
    record = run_json(run_dir)
    stopped_at = record["last_step"]
    assert record["status"] == names.STATUS_STOPPED, record
    assert isinstance(stopped_at, int) and checkpointed < stopped_at < 120
    assert latest_checkpoint_step(run_dir) == stopped_at
    final = {**digests(second.output(0)), **digests(second.output(1))}
    assert final[0] == final[1] and final[0][0] == names.STATUS_STOPPED, final
    # Each worker's ledger spans both attempts; worker 0's steps and wait for the lost peer,
    # after the checkpoint both resumed from, are lost work; the chief's is run.json's.
    ledgers = [json.loads((run_dir / "ledger" / f"worker-{i}.json").read_text()) for i in (0, 1)]
    for own in ledgers:
        buckets, wall = own["ledger"], own["ledger_wall"]
        assert own["ledger_step"] == stopped_at
        assert sum(buckets.values()) == pytest.approx(wall, abs=1e-3)
        assert 0 <= buckets["unknown"] <= 0.05 * wall, buckets
        assert buckets["scheduler"] > 0 and buckets["checkpoint"] > 0
    assert ledgers[0]["ledger"]["lost"] > 0, ledgers[0]
    assert ledgers[0]["ledger"] != ledgers[1]["ledger"]  # each measured its own
    assert record["ledger"] == ledgers[0]["ledger"]
