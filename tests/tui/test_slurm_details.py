"""A job that names its Slurm job: the index hands the scheduler's state to the job, the alert when
Slurm ended a job whose run.json says running, and the dashboard's job detail line.

Real event files, the real watcher and index; Slurm's commands answer through the producer's
runner seam with squeue's real output format (tests/agent/test_slurm.py asks a real Slurm).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from distcore.jobs.slurm_states import SlurmStates
from distmon.widgets.panels import render_details
from tests.core.test_jobs_index import index_over, snapshot
from tests.kit.writers import write_scalars


def squeue_says(state: str, ended_ago: float = 60.0) -> SlurmStates:
    """squeue answering for job 4242; an ended job's EndTime `ended_ago` seconds back (Slurm's
    local-time format)."""
    end = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - ended_ago))

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        assert argv[0] == "/usr/bin/squeue" and "--jobs=4242" in argv, argv
        return subprocess.CompletedProcess(list(argv), 0, f"4242|{state}|None|{end}\n", "")

    return SlurmStates(runner=run, which=lambda name: f"/usr/bin/{name}")


def job_dir(tmp_path: Path, status: str) -> Path:
    job = tmp_path / "runs" / "train-a"
    write_scalars(job / "train", [1.0, 0.9, 0.8], time.time() - 5)
    (job / "run.json").write_text(json.dumps({
        "status": status, "last_step": 3, "scheduler": {
            "kind": "slurm", "job_id": "4242", "step_id": "0", "node_list": "gpu[01-02]",
            "partition": "a100\x1b[31m"}}))
    return job


def test_scheduler_state_reaches_the_job_and_its_detail(tmp_path: Path) -> None:
    job_dir(tmp_path, "running")
    slurm = squeue_says("RUNNING")
    index, _ = index_over(tmp_path / "runs", scheduler=slurm)
    first = snapshot(index)
    assert first.jobs[0].scheduler_state is None  # never waits for the scheduler
    assert slurm.query_once()
    job = snapshot(index).jobs[0]
    assert job.scheduler_state is not None and job.scheduler_state.state == "RUNNING"
    text = render_details(job, job.alerts).plain
    assert "scheduler: Slurm job 4242 step 0 on gpu[01-02] (partition a100" in text
    assert ": RUNNING" in text and "\x1b" not in text  # escaped: run.json is untrusted
    assert not [a for a in job.alerts if a.kind == "agent_died"]


@pytest.mark.parametrize(("ended_ago", "alerted"), [(60.0, True), (5.0, False)])
def test_slurm_ended_while_run_json_says_running_is_critical(
    tmp_path: Path, ended_ago: float, alerted: bool
) -> None:
    """Once the end is 30 s old: before, a shared filesystem may not show run.json's end yet."""
    job_dir(tmp_path, "running")
    slurm = squeue_says("NODE_FAIL", ended_ago)
    index, _ = index_over(tmp_path / "runs", scheduler=slurm)
    snapshot(index)
    slurm.query_once()
    snap = snapshot(index)
    died = [a for a in snap.alerts if a.kind == "agent_died"]
    assert len(died) == int(alerted)
    if alerted:
        assert died[0].severity == "critical"
        assert "Slurm job 4242 is NODE_FAIL" in died[0].message


def test_a_job_that_wrote_its_end_raises_nothing(tmp_path: Path) -> None:
    job_dir(tmp_path, "finished")
    slurm = squeue_says("COMPLETED")
    index, _ = index_over(tmp_path / "runs", scheduler=slurm)
    snapshot(index)
    slurm.query_once()
    assert not [a for a in snapshot(index).alerts if a.kind == "agent_died"]


async def test_the_dashboard_names_the_slurm_job_and_its_end(tmp_path: Path) -> None:
    """The real app over a real watcher: the producer (started by the app) asks Slurm off the
    UI thread; the focused job's detail names the job and its state, the alert follows."""
    from distcore.events import LogdirWatcher, RunStore
    from distmon.app import DistmonApp
    from distmon.options import Options
    from distmon.producers import Producers
    from distmon.widgets.panels import Panel
    from tests.tui.conftest import ready

    job_dir(tmp_path, "running")
    logdir = tmp_path / "runs"
    slurm = squeue_says("CANCELLED")
    slurm.interval = 0.1

    def producers() -> Producers:
        store = RunStore()
        return Producers(store, LogdirWatcher([logdir], store), slurm=slurm)

    app = DistmonApp(Options(logdirs=(logdir,), refresh=0.2, no_gpu=True), producers=producers)
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        details, alerts = app.query_one("#details", Panel), app.query_one("#alerts", Panel)
        deadline = time.monotonic() + 60  # bounds a failure only: a loaded machine is slow
        while time.monotonic() < deadline:
            if not str(details.render()).strip():  # no job focused yet (its row came late)
                await pilot.press("enter")
            if "CANCELLED" in str(details.render()) and "without a word" in str(alerts.render()):
                break
            await pilot.pause(0.05)
        text = str(details.render())
        assert "Slurm job 4242 step 0 on gpu[01-02]" in text and ": CANCELLED" in text
        assert "Slurm job 4242 is CANCELLED" in str(alerts.render())
