"""`make demo`: two real distagent jobs on real JPEGs, one healthy and one flagged as input-bound.

Small overrides keep them short; without a terminal the demo waits for the jobs and prints the
`--once` report. In a terminal, quitting distmon stops the jobs: `stop_jobs` is tested on real
processes (a full terminal run of the demo takes minutes on two loaded cores).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

# A short version of the demo: 40 steps each, on a smaller set of the same images.
SMALL = ["--set", "train.epochs=1", "--set", "train.steps_per_epoch=40",
         "--set", "train.log_every_steps=10", "--set", "data.per_replica_batch_size=64"]


def status(logdir: Path, job: str) -> str:
    return str(json.loads((logdir / job / "run.json").read_text())["status"])


@pytest.mark.slow
def test_without_a_terminal_the_jobs_finish_and_the_report_flags_input_bound(
    tmp_path: Path,
) -> None:
    logdir, images = tmp_path / "demo", tmp_path / "images"
    # The demo writes its images when they are missing; 640 instead of 1280 keeps this short.
    made = subprocess.run([sys.executable, "-m", "distagent.data.samples", str(images),
                           "--per-class", "64"], capture_output=True, text=True, timeout=240)
    assert made.returncode == 0, made.stderr
    done = subprocess.run(
        [sys.executable, "-m", "distmon.demo", "--logdir", str(logdir), "--images", str(images),
         *SMALL, "--set", "data.validation_fraction=0.2"],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "images/train" in done.stdout and "images_input_bound/train" in done.stdout
    flagged = [line for line in done.stdout.splitlines() if "images_input_bound/train:" in line]
    assert flagged and "input-bound" in flagged[0] and "prefetch" in flagged[0]
    healthy = [line for line in done.stdout.splitlines() if line.strip().startswith("images/")]
    assert not any("input-bound" in line for line in healthy)
    assert status(logdir, "images") == status(logdir, "images_input_bound") == "finished"
    for job in ("images", "images_input_bound"):
        record = json.loads((logdir / job / "run.json").read_text())
        assert record["config"]["data"]["images"]["directory"] == str(images.resolve())


STUBBORN_JOB = """
import signal, sys, time
def stop(signum, frame):
    open(sys.argv[1], "w").write("stopped")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(600)
"""


def test_stop_jobs_sends_sigterm_to_each_jobs_session(tmp_path: Path) -> None:
    """What quitting distmon does in the demo: each job gets SIGTERM (checkpoint, exit)."""
    from distmon.demo import stop_jobs

    jobs = [
        subprocess.Popen(
            [sys.executable, "-c", STUBBORN_JOB, str(tmp_path / f"job{i}")],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for i in range(2)
    ]
    for job in jobs:
        assert job.stdout is not None and job.stdout.readline().strip() == "ready"
        job.stdout.close()
    began = time.monotonic()
    stop_jobs(jobs)
    assert [job.returncode for job in jobs] == [0, 0]
    assert [(tmp_path / f"job{i}").read_text() for i in range(2)] == ["stopped", "stopped"]
    assert time.monotonic() - began < 20
