"""One Slurm job through all of it, and where its time went: the shipped train.sbatch's two
workers are killed with SIGKILL mid-run and the job is submitted again (it resumes from its
checkpoint), rolls back once from a NaN (tests/agent/nan_model.py) and is requeued once with
`scontrol requeue`, then finishes. Its ledger spans the three attempts: the steps the kill
made the job do again are `lost`, within 10% of what they took the first time (attempt 1's own
event wall times), the rollback is `recovery`, the gaps are `scheduler`, and under 5% of the
wall time is in no bucket (`unknown`). Both as run.json holds it and as distmon shows it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from distagent.train.ledger import worker_ledger_path
from distcore import names
from distcore.jobs.ledger import BUCKETS, TIME_PREFIX
from tests.agent.nan_model import NAN_AFTER_ENV, NAN_ONCE_ENV
from tests.agent.test_slurm import (
    REPO,
    SBATCH,
    TOML,
    checkpoint_step,
    distmon_json,
    run_json,
    sbatch,
    task_pid,
    tiny,
    wait_until,
)
from tests.agent.test_slurm_time import assert_quiet, output_of, watch_end
from tests.kit.slurm import SlurmCluster

pytestmark = pytest.mark.slow

STEPS = 1000  # attempt 2 must outlast a loaded slurmctld's requeue
EVERY = 200  # checkpoint_every_steps: the kill comes REDONE to EVERY - 50 steps past one
REDONE = 100
LOST_TOLERANCE = 0.10
UNKNOWN_SHARE = 0.05


def submit(slurm: SlurmCluster, tmp: Path) -> str:
    sets = {"model.name": '"tests.agent.nan_model:nan_mlp"', "train.log_every_steps": "10",
            "train.checkpoint_every_steps": str(EVERY), "train.on_divergence": '"rollback"',
            "optimizer.warmup_epochs": "0"}
    return sbatch(slurm, tmp, str(SBATCH), str(TOML),
                  *tiny(tmp / "runs", steps=STEPS, latency=1.0, name="all"),
                  *[arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")])


def first_attempt_points(run_dir: Path) -> dict[int, tuple[float, dict[str, float]]]:
    """{step: (wall time, {time/ tag: value})} of the first event file (the first attempt's
    chief: later attempts write their own files, rewriting the steps after the checkpoint)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    files = sorted((run_dir / names.TRAIN_DIR).glob("*tfevents*"),
                   key=lambda p: float(p.name.split(".")[3]))
    points: dict[int, tuple[float, dict[str, float]]] = {}
    for event in EventFileLoader(str(files[0])).Load():
        for value in event.summary.value:
            wall, tags = points.setdefault(event.step, (event.wall_time, {}))
            points[event.step] = (max(wall, event.wall_time), tags)
            if value.tag.startswith(TIME_PREFIX):
                tags[value.tag] = float(tensor_util.make_ndarray(value.tensor))
    return points


def timed_point(run_dir: Path, step: int) -> bool:
    """The first attempt's events hold `step`'s point with its time/ tags."""
    if not list((run_dir / names.TRAIN_DIR).glob("*tfevents*")):
        return False
    return len(first_attempt_points(run_dir).get(step, (0.0, {}))[1]) == len(BUCKETS)


def logged_step(run_dir: Path) -> int:
    """The step of worker 0's newest log point (its ledger file, rewritten at each: run.json is
    written at most once a second, longer than the window a kill must fall in)."""
    try:
        record = json.loads(worker_ledger_path(run_dir, 0).read_text())
    except (OSError, ValueError):
        return -1
    step = record.get("ledger_step") if isinstance(record, dict) else None
    return step if isinstance(step, int) else -1


def kill_past_a_checkpoint(slurm: SlurmCluster, job_id: str, run_dir: Path,
                           pids: list[int]) -> float:
    """SIGKILL both workers once they are REDONE steps past a checkpoint (and not near the
    next one); when they stopped for good. Polled tightly: the window is under a second.

    The workers are stopped (SIGSTOP) before the last look: the ledger's record comes first and
    the event point a moment later, from the writing thread, and reading the events takes long
    on a loaded machine. Stopped, nothing moves while the test checks that both are there (the
    first attempt's events time what was lost); else they go on and it looks again."""
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        if in_window(run_dir):
            signal_all(pids, signal.SIGSTOP)
            ready, killed_at = False, time.time()
            try:
                ready = in_window(run_dir) and timed_point(run_dir, logged_step(run_dir))
            finally:  # a look that fails never leaves the job stopped
                signal_all(pids, signal.SIGKILL if ready else signal.SIGCONT)
            if ready:
                break
        time.sleep(0.01)
    else:
        raise AssertionError(f"never {REDONE} steps past a checkpoint\n{slurm.logs()}")
    slurm.wait_state(job_id, ("FAILED", "CANCELLED", "COMPLETED"), timeout=60)
    return killed_at


def in_window(run_dir: Path) -> bool:
    saved = checkpoint_step(run_dir)
    return saved > 0 and REDONE <= logged_step(run_dir) - saved <= EVERY - 50


def signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        os.kill(pid, signum)


def test_kill_rollback_requeue_one_ledger(slurm: SlurmCluster, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    run_dir = tmp_path / "runs" / "all"

    # Attempt 1: killed with SIGKILL well past a checkpoint, as a node's OOM killer would.
    first_id = submit(slurm, tmp_path)

    pids = [wait_until(f"task {rank}", lambda r=rank: task_pid(slurm, first_id, r), slurm=slurm)
            for rank in (0, 1)]
    killed_at = kill_past_a_checkpoint(slurm, first_id, run_dir, pids)
    first = run_json(run_dir)
    resumed, last = checkpoint_step(run_dir), logged_step(run_dir)  # as the kill left them
    assert run_json(run_dir)["status"] == names.STATUS_RUNNING  # no word written

    # Attempt 2: submitted again, it resumes; its 30th forward pass is NaN and it rolls back.
    monkeypatch.setenv(NAN_AFTER_ENV, "30")
    monkeypatch.setenv(NAN_ONCE_ENV, str(tmp_path / "nan-once"))
    second_id = submit(slurm, tmp_path)
    wait_until("the rollback", lambda: run_json(run_dir).get("recoveries")
               and (run_json(run_dir).get("last_step") or 0) > resumed + 40, slurm=slurm)

    # Attempt 3: after a requeue, and Slurm's hold on it lifted.
    slurm.run("scontrol", "requeue", second_id)
    stopped, _ = watch_end(slurm, second_id, run_dir, names.STATUS_STOPPED, requeued=True)
    slurm.release_requeued(second_id)
    wait_until("attempt 3 running", lambda: run_json(run_dir).get(
        "status") == names.STATUS_RUNNING, slurm=slurm)
    final, _ = watch_end(slurm, second_id, run_dir, names.STATUS_FINISHED)
    assert final["last_step"] == STEPS and len(final["recoveries"]) == 1, final["recoveries"]
    assert final["scheduler"]["restart_count"] == "1", final["scheduler"]
    assert final["recoveries"][0]["restored_step"] >= resumed
    for job_id in (first_id, second_id):
        assert_quiet(output_of(tmp_path, job_id, run_dir))

    # Every attempt counted: the job starts with the first, its wall spans all three, and the
    # gaps before the second and third attempts are in `scheduler` (attempt 1's pending too).
    ledger, wall = final["ledger"], final["ledger_wall"]
    starts = [float(r["ledger_attempt_start"]) for r in (first, stopped, final)]
    assert starts == sorted(starts) and len(set(starts)) == 3, starts
    assert len(list((run_dir / names.TRAIN_DIR).glob("*tfevents*"))) == 3  # one per attempt
    assert final["ledger_start"] == pytest.approx(first["ledger_start"], abs=1e-6)
    assert wall == pytest.approx(final["ledger_time"] - first["ledger_start"], abs=1e-3)
    assert float(final["end_time"]) - float(first["ledger_start"]) <= wall + 1.0, final
    assert sum(ledger.values()) == pytest.approx(wall, abs=1e-3)
    assert ledger["recovery"] > 0 and ledger["checkpoint"] > 0 and ledger["restore"] > 0, ledger
    gaps = (starts[1] - killed_at) + (starts[2] - float(stopped["end_time"]))
    assert ledger["scheduler"] >= gaps > 0, (ledger, gaps)

    # lost: the steps from the checkpoint attempt 2 resumed from to attempt 1's last record
    # (what it did after that falls in the scheduler gap), as long as they took in
    # attempt 1's events, less the save of that checkpoint itself (kept, not done again).
    points = first_attempt_points(run_dir)
    assert last - resumed >= REDONE and last in points and resumed in points, (resumed, last)

    def delta(bucket: str) -> float:
        return points[last][1][TIME_PREFIX + bucket] - points[resumed][1][TIME_PREFIX + bucket]

    took = points[last][0] - points[resumed][0] - delta("checkpoint")
    unknown = ledger["unknown"] / wall
    print(f"\nsteps {resumed}..{last} took {took:.3f} s the first time (in its steps "
          f"{delta('compute') + delta('input_wait'):.3f} s), lost {ledger['lost']:.3f} s "
          f"({ledger['lost'] / took - 1:+.1%}); wall {wall:.1f} s: "
          + ", ".join(f"{b} {ledger[b]:.2f}" for b in BUCKETS) + f"; unknown {unknown:.2%}")
    assert abs(ledger["lost"] - took) <= LOST_TOLERANCE * took, (ledger["lost"], took)
    assert 0 <= unknown <= UNKNOWN_SHARE, ledger

    # distmon shows the same ledger.
    [job] = [j for j in distmon_json(slurm, tmp_path / "runs")["jobs"] if j["name"] == "all"]
    shown = job["ledger"]
    assert shown["source"] == "agent" and shown["wall_seconds"] == pytest.approx(wall, abs=1e-3)
    assert shown["seconds"] == pytest.approx(ledger, abs=1e-5), shown
    assert shown["goodput"] == pytest.approx(ledger["compute"] / wall, abs=1e-4)
