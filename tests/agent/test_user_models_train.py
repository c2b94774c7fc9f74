"""The sample configs of user models (examples/) train to a falling loss on 2 CPU replicas and
resume after kill -9 at the step of their last checkpoint; an exception in the user's loss
ends the job `failed`, the cause leading run.json's error and the traceback in the log."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from distcore import names
from tests.agent.test_cli_runs import ENV, agent, latest_checkpoint_step, record, wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TOTAL = 20
CHECKPOINT_EVERY = 5


def _start(config: str, logdir: Path) -> subprocess.Popen[str]:
    settings = {
        "run.logdir": str(logdir), "run.name": config, "strategy.cpu_replicas": 2,
        "train.epochs": 2, "train.steps_per_epoch": TOTAL // 2, "train.log_every_steps": 5,
        "train.checkpoint_every_steps": CHECKPOINT_EVERY,
        # A slow, naive input: time to catch the job between its checkpoints.
        "data.optimize": "false", "data.read_latency_ms": 3,
    }
    overrides = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    return subprocess.Popen(agent("start", f"sample_configs/{config}.toml", *overrides),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=ENV)


def _losses(run_dir: Path) -> list[float]:
    from distcore.events import load_once

    (train,) = [r for r in load_once([run_dir.parent]) if r.name == f"{run_dir.name}/train"]
    return list(train.scalars[names.LOSS].values)


@pytest.mark.parametrize("config", ["regression", "two_inputs", "text"])
def test_sample_model_trains_and_resumes_after_kill(config: str, tmp_path: Path) -> None:
    run_dir = tmp_path / config
    first = _start(config, tmp_path)
    wait_for(lambda: (latest_checkpoint_step(run_dir) or 0) >= CHECKPOINT_EVERY, first,
             timeout=300)
    first.kill()
    first.wait()
    killed_at = latest_checkpoint_step(run_dir)
    assert killed_at is not None and killed_at < TOTAL
    second = _start(config, tmp_path)
    out, _ = second.communicate(timeout=600)
    assert second.returncode == 0, out
    assert f"resuming {run_dir} from step {killed_at}" in out
    final = record(run_dir)
    assert (final["status"], final["last_step"]) == (names.STATUS_FINISHED, TOTAL)
    losses = _losses(run_dir)
    assert losses[-1] < losses[0], losses


FAILING_LOSS = """
def loss(y_true, y_pred):
    raise ValueError("the user's loss cannot take this")
"""


def test_an_exception_in_the_users_loss_fails_the_job(tmp_path: Path) -> None:
    (tmp_path / "failing_loss.py").write_text(FAILING_LOSS)
    run_dir = tmp_path / "job"
    proc = subprocess.run(
        agent("start", str(ROOT / "sample_configs" / "regression.toml"),
              "--set", f"run.logdir={tmp_path}", "--set", "run.name=job",
              "--set", "train.loss=failing_loss:loss", "--set", "train.steps_per_epoch=2"),
        cwd=tmp_path, capture_output=True, text=True, env={**ENV, "PYTHONPATH": _path()},
        timeout=600)
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "failing_loss.py" in proc.stderr
    final: dict[str, Any] = json.loads((run_dir / names.RUN_JSON).read_text())
    assert final["status"] == names.STATUS_FAILED
    assert final["error"] == "ValueError: the user's loss cannot take this"


def _path() -> str:
    """The examples package from the repository, the user's loss from the current directory."""
    import os

    return os.pathsep.join([str(ROOT), ENV.get("PYTHONPATH", "")])
