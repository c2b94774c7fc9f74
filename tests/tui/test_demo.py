"""`make demo`: two real distagent jobs on real JPEGs behind 5 ms of storage latency, one healthy
and one flagged as input-bound.

Fewer steps keep them short (the demo's batch and latency are kept: they are its lesson); without
a terminal the demo waits for the jobs to end and prints the `--once` report, which is the state
asserted. In a terminal, quitting distmon stops the jobs: `stop_jobs` is tested on real
processes, and `data.read_latency_ms` jobs stopping on SIGTERM in tests/agent/test_read_latency.py
(a full terminal run of the demo takes minutes on two loaded cores).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distcore import names

# One logged window over the whole run (the first, compiling call is not timed): the report
# judges the job, not one step that a busy machine delayed.
SHORT = ["--set", "train.epochs=1", "--set", "train.steps_per_epoch=24",
         "--set", "train.log_every_steps=24"]


def status(logdir: Path, job: str) -> str:
    return str(json.loads((logdir / job / "run.json").read_text())["status"])


@pytest.mark.slow
@pytest.mark.timeout(1800)  # bounds a failure only: two TF jobs on two loaded cores
def test_without_a_terminal_the_jobs_finish_and_the_report_flags_input_bound(
    tmp_path: Path,
) -> None:
    logdir, images = tmp_path / "demo", tmp_path / "images"
    # The demo writes its images when they are missing; 320 small ones keep this short (the
    # lesson is the storage latency, paid per read whatever the size).
    made = subprocess.run([sys.executable, "-m", "distagent.data.samples", str(images),
                           "--per-class", "32", "--size", "64"],
                          capture_output=True, text=True, timeout=900)
    assert made.returncode == 0, made.stderr
    demo = subprocess.Popen(
        [sys.executable, "-m", "distmon.demo", "--logdir", str(logdir), "--images", str(images),
         *SHORT],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = demo.communicate(timeout=1500)  # the naive job waits ~40 s for storage
    finally:
        if demo.poll() is None:  # SIGTERM: the demo stops its jobs (their own sessions)
            demo.terminate()
            demo.communicate(timeout=60)
    assert demo.returncode == 0, out
    assert status(logdir, "images") == status(logdir, "images_input_bound") == "finished"
    alerts = out[out.index("Alerts:"):].splitlines()
    flagged = [line for line in alerts if "images_input_bound/train:" in line]
    assert flagged and "highly input-bound" in flagged[0] and "prefetch" in flagged[0], out
    # The healthy job is never flagged for its validation (judged on its own history:
    # tests/tui/test_validation_alerts.py has the demo's whole noisy series), nor found highly
    # input-bound. Other work on a small machine can starve its parallel reads (10% waiting
    # beside two busy loops and two other tests, on 2 cores): then, and only then, it may read
    # moderately input-bound, at a small part of the naive job's wait.
    healthy = [line for line in alerts if "images/" in line]
    waits = {}
    for job in ("images", "images_input_bound"):
        record = json.loads((logdir / job / "run.json").read_text())
        assert record["config"]["data"]["images"]["directory"] == str(images.resolve())
        assert record["config"]["data"]["read_latency_ms"] == 5.0
        waits[job] = record["metrics"][names.INPUT_WAIT_FRACTION]
    assert all("images/train: Your program is moderately input-bound" in line
               for line in healthy), out
    assert not healthy or waits["images"] < waits["images_input_bound"] / 4, (waits, out)


STUBBORN_JOB = """
import signal, sys, time
def stop(signum, frame):
    open(sys.argv[1], "w").write("stopped")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(600)
"""


def test_stop_jobs_sends_sigterm_to_each_jobs_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What quitting distmon does in the demo: each job gets SIGTERM (checkpoint, exit)."""
    from distmon.demo import stop_jobs

    jobs = [
        subprocess.Popen(
            [sys.executable, "-c", STUBBORN_JOB, str(tmp_path / f"job{i}")],
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        for i in range(2)
    ]
    for job in jobs:
        assert job.stdout is not None and job.stdout.readline().strip() == b"ready"
        job.stdout.close()
    stop_jobs(jobs)
    assert capsys.readouterr().out == "distmon.demo: stopping 2 jobs (saving checkpoints)...\n"
    # Exit status 0 from their own handler: SIGTERM, not the SIGKILL that ends a stuck job.
    assert [job.returncode for job in jobs] == [0, 0]
    assert [(tmp_path / f"job{i}").read_text() for i in range(2)] == ["stopped", "stopped"]


def test_jobs_that_already_ended_are_not_announced(capsys: pytest.CaptureFixture[str]) -> None:
    from distmon.demo import stop_jobs

    done = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    done.wait()
    stop_jobs([done])
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(("done", "total", "shown", "line"), [
    (0, 1280, 0, None),  # TensorFlow still starting: the first line said what is under way
    (127, 1280, 0, None),
    (128, 1280, 0, "  128/1,280 images written"),
    (200, 1280, 128, None),  # the same tenth
    (1100, 1280, 128, "  1,100/1,280 images written"),
    (1280, 1280, 1100, None),  # done: the writer's exit ends the wait
    (5, 5, 0, None),
    (3, 5, 0, "  3/5 images written"),
])
def test_the_image_writer_reports_each_tenth(done: int, total: int, shown: int,
                                             line: str | None) -> None:
    from distmon.demo import progress_line

    assert progress_line(done, total, shown) == line
