"""A real `distagent start` made to diverge: --once --json names the step in a critical alert,
--once --check exits 1, and the dashboard (real watcher, real index) shows the alert."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distmon.widgets.panels import Panel
from tests.kit.wait import until
from tests.tui.test_live import app_over, rows

pytestmark = pytest.mark.slow

QUICKSTART = Path(__file__).resolve().parents[2] / "sample_configs" / "quickstart.toml"
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
SETTINGS = {
    "run.name": "boom",
    "optimizer.base_learning_rate": "1e30",  # absurd: the loss is NaN within a few steps
    "optimizer.warmup_epochs": 0,
    "train.log_every_steps": 2,
    "data.synthetic.num_examples": 1024,
    "data.synthetic.input_shape": "[8, 8, 1]",
    "data.validation_fraction": 0.0,
}


@pytest.fixture(scope="module")
def diverged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logdir = tmp_path_factory.mktemp("diverged")
    sets = [a for k, v in {**SETTINGS, "run.logdir": logdir}.items() for a in ("--set", f"{k}={v}")]
    done = subprocess.run(
        [sys.executable, "-m", "distagent", "start", str(QUICKSTART), *sets],
        capture_output=True, text=True, env=ENV, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    record = json.loads((logdir / "boom" / "run.json").read_text())
    assert record["status"] == "diverged", record
    return logdir


def distmon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "distmon", *args], capture_output=True, text=True, env=ENV,
        timeout=120,
    )  # fmt: skip


def test_once_json_has_a_critical_alert_naming_the_step(diverged: Path) -> None:
    done = distmon("--once", "--json", "--no-gpu", str(diverged))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    step = json.loads((diverged / "boom" / "run.json").read_text())["last_step"]
    critical = [a for a in doc["alerts"] if a["severity"] == "critical"]
    assert critical and critical[0]["run"] == "boom" and critical[0]["kind"] == "job_diverged"
    assert f"at step {step}" in critical[0]["message"]
    assert [j["status"] for j in doc["jobs"]] == ["diverged"]
    assert not any(a["kind"] == "run_stalled" for a in doc["alerts"])  # ended: never stalled


def test_once_check_exits_1_on_a_critical_alert(diverged: Path, tmp_path: Path) -> None:
    assert distmon("--once", "--check", "--no-gpu", str(diverged)).returncode == 1
    healthy = tmp_path / "healthy"
    healthy.mkdir()
    assert distmon("--once", "--check", "--no-gpu", str(healthy)).returncode == 0


async def test_the_dashboard_shows_it(diverged: Path) -> None:
    app = app_over(diverged)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: rows(app).get("boom", ("",))[0] == "diverged", "the job")
        alerts = app.query_one("#alerts", Panel)
        await until(pilot, lambda: "training diverged at step" in str(alerts.render()), "alert")
        assert str(alerts.render()).startswith("✖ boom: training diverged at step")
