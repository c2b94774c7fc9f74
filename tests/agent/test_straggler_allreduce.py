"""A worker that slows an all-reduce-bound job is named, through the agent's own heartbeat and
run.json writers and `distmon --once --json`.

On a small MLP on two workers the step is mostly its all-reduce: with worker 1 stopped for a
share of every 100 ms both workers' steps took 16 ms rather than 7, worker 1's compute time read
1.5x worker 0's, and worker 0's wait in the reduction beyond worker 1's only 5% of the step (its
wait for worker 1's gradients falls inside its own backward pass). These are the heartbeats the
workers would write of those figures (no TensorFlow: the writers take the scalars the compiled
step reports); the real-job straggler test is tests/agent/test_multiworker_straggler.py.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from distagent.train.heartbeat import HangSettings, Heartbeat
from distagent.train.rundir import RunRecord
from distcore import names
from tests.agent.test_multiworker_hang import distmon_once

STEP_MS = 16.0
LOG_EVERY = 10


def write_heartbeats(run_dir: Path, compute: list[float], wait: list[float],
                     intervals: int) -> None:
    """Each worker's heartbeat after `intervals` log intervals of these per-step means, and the
    chief's run.json copy of both, as a running job writes them (beside its loss)."""
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(run_dir / names.TRAIN_DIR)) as writer:
        writer.add_scalar(names.LOSS, 0.5, LOG_EVERY * intervals)
    record = RunRecord(run_dir, {"name": run_dir.name, "status": names.STATUS_RUNNING,
                                 "start_time": time.time(), "last_step": None})
    settings = HangSettings(beat_seconds=60.0)  # beaten below, not by their threads
    beats = [Heartbeat(run_dir, worker=i, workers=2, settings=settings, is_chief=i == 0,
                       publish=lambda workers: record.update(workers=workers))
             for i in range(2)]
    for step in range(LOG_EVERY, LOG_EVERY * (intervals + 1), LOG_EVERY):
        for beat, seconds, waited in zip(beats, compute, wait, strict=True):
            beat.step_ended(step)
            beat.interval(step, {names.STEP_COMPUTE_SECONDS: seconds,
                                 names.REDUCE_WAIT_SECONDS: waited,
                                 names.STEP_TIME_MS: STEP_MS}, steps=LOG_EVERY)
    beats[1].beat()
    beats[0].beat()  # the chief last: run.json holds both


def stragglers(doc: dict[str, Any]) -> list[str]:
    return [a["message"] for a in doc["alerts"] if a["kind"] == "straggler"]


@pytest.mark.parametrize(("slow", "intervals", "named"), [
    (1.5, 60, True),  # throttled: the job runs at worker 1's pace
    (1.1, 60, False),  # two healthy workers' noise
    (1.5, 1, False),  # one log interval of 10 steps: too few to name anybody by
])
def test_the_worker_that_holds_an_allreduce_bound_job_back_is_named(
        tmp_path: Path, slow: float, intervals: int, named: bool) -> None:
    run_dir = tmp_path / "runs" / "mlp"
    run_dir.mkdir(parents=True)
    write_heartbeats(run_dir, [0.0064, 0.0064 * slow], [0.0096, 0.0088], intervals)
    doc = distmon_once(tmp_path / "runs")
    found = stragglers(doc)
    if not named:
        assert found == []
        return
    assert found == ["worker 1 ({host}) is the straggler: its steps take 1.5x worker 0's; the "
                     "others wait 5% of each step".format(host=doc["jobs"][0]["workers"][1]
                                                          ["host"])]
    score = doc["jobs"][0]["workers"][1]["score"]
    assert score["window_steps"] == LOG_EVERY * intervals
