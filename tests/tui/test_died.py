"""A job whose run.json says running but whose process on this machine is gone is `died` at
once, in `--once` (text and JSON), the dashboard and `--serve`: before, it read `running` and,
with heartbeats in its run.json, a critical `hung` a minute later."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from distcore import names
from distmon.once import run_once
from distmon.options import Options
from tests.kit.wait import until, wait_until
from tests.kit.writers import write_job
from tests.tui.test_live import app_over, rows
from tests.tui.test_serve import Serve, sample, scrape


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc
    proc.kill()
    proc.wait()


def record(proc: subprocess.Popen[bytes], host: str | None = None) -> dict[str, Any]:
    """run.json of a job still running in `proc`, its worker's heartbeat fresh."""
    now = time.time()
    beat = {"worker": 0, "time": now, "beat_seconds": 2.0, "step": 19, "step_time": now,
            "hang_seconds": 60.0, "phase": "computing"}
    return {"status": names.STATUS_RUNNING, "pid": proc.pid, "host": host or socket.gethostname(),
            "pid_create_time": psutil.Process(proc.pid).create_time(), "last_step": 19,
            "workers": {"0": beat}}


def job_with(logdir: Path, name: str, doc: dict[str, Any]) -> None:
    write_job(logdir, name, [1.0 / (i + 1) for i in range(20)])
    (logdir / name / names.RUN_JSON).write_text(json.dumps(doc))


@pytest.fixture
def logdir(tmp_path: Path, child: subprocess.Popen[bytes]) -> Path:
    """`killed` (its process gone), `alive` (running) and `elsewhere` (another machine's pid)."""
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    job_with(tmp_path, "killed", record(killed))
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    job_with(tmp_path, "alive", record(child))
    job_with(tmp_path, "elsewhere", {**record(child, "another-machine"), "pid": killed.pid})
    return tmp_path


def once(logdir: Path, *, as_json: bool) -> str:
    out = io.StringIO()
    assert run_once(Options(logdirs=(logdir,), json=as_json, once=True, no_gpu=True), out) == 0
    return out.getvalue()


def test_once_json_calls_a_job_without_its_process_died_at_once(logdir: Path) -> None:
    doc = json.loads(once(logdir, as_json=True))
    status = {job["name"]: job["status"] for job in doc["jobs"]}
    assert status == {"killed": "died", "alive": "running", "elsewhere": "running"}
    kinds = {(a["kind"], a["run"]) for a in doc["alerts"]}
    assert ("agent_died", "killed") in kinds
    assert not any(kind == "hung" for kind, _ in kinds)
    died = next(a for a in doc["alerts"] if a["kind"] == "agent_died")
    assert "its process (pid" in died["message"] and "is gone" in died["message"]


def test_once_text_shows_died(logdir: Path) -> None:
    text = once(logdir, as_json=False)
    assert "job killed: died, step 19" in text and "job alive: running, step 19" in text
    assert "✖ critical killed: run.json still says running but its process (pid" in text


async def test_the_dashboard_shows_died(logdir: Path) -> None:
    app = app_over(logdir)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: rows(app).get("killed", ("",))[0] == "died", "killed: died")
        assert rows(app)["alive"][0] == "running"


def test_serve_exports_died(tmp_path: Path, logdir: Path) -> None:
    serve = Serve(tmp_path, ["--metrics", "0", "--no-gpu", str(logdir)])
    try:
        port = serve.port()

        def listed() -> str | None:
            text = scrape(port)
            return text if 'job="killed"' in text else None

        text = str(wait_until(listed))
        assert sample(text, "distmon_job_status", job="killed", distmon_job_status="died") == 1
        assert sample(text, "distmon_alert", job="killed", kind="agent_died") == 1
        assert sample(text, "distmon_alert", job="killed", kind="hung") is None
    finally:
        assert serve.stop() == 0, serve.stderr()


def test_a_hung_job_is_quoted_at_run_json_s_last_step(tmp_path: Path,
                                                      child: subprocess.Popen[bytes]) -> None:
    """The heartbeats run ahead of run.json (written at log points): the alert quotes the step
    the job's row shows, not another."""
    doc = record(child)
    old = time.time() - 120  # no beat for two minutes: past its hang limit
    doc["workers"]["0"].update(time=old, step_time=old, step=23)
    job_with(tmp_path, "stuck", doc)
    # A first look ages a heartbeat by its file on this machine, never by the writer's clock.
    os.utime(tmp_path / "stuck" / names.RUN_JSON, (old, old))
    alerts = json.loads(once(tmp_path, as_json=True))["alerts"]
    hung = next(a for a in alerts if a["kind"] == "hung")
    assert hung["message"].startswith("job hung after step 19: worker 0's heartbeat stopped")
