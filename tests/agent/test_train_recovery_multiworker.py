"""A multi-worker job recovers together: two real `launch-local` workers on 127.0.0.1 with a far
too high learning rate roll back at the same step, to the same checkpoint, with the same lowered
rate, and end with equal weights (their digests match)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from distcore import names
from tests.agent.test_multiworker import child_env, digests, run_json, write_config

pytestmark = pytest.mark.slow


def test_two_workers_roll_back_together(tmp_path: Path) -> None:
    config = write_config(tmp_path, steps=6)
    overrides = ["optimizer.base_learning_rate=300.0", "optimizer.warmup_epochs=0",
                 'train.on_divergence="rollback"', "train.recovery_lr_factor=0.01",
                 "train.loss_upper_bound=20.0", "train.epochs=1"]
    result = subprocess.run(
        [sys.executable, "-m", "distagent", "launch-local", str(config), "--workers", "2",
         *[arg for item in overrides for arg in ("--set", item)]],
        capture_output=True, text=True, env=child_env(), timeout=300,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    final = digests(out)
    assert set(final) == {0, 1}, out[-3000:]
    assert final[0] == final[1] and final[0][0] == names.STATUS_FINISHED, out[-3000:]
    record = run_json(tmp_path / "runs" / "mw")
    recoveries = record["recoveries"]
    assert isinstance(recoveries, list) and recoveries, out[-3000:]
    assert all(r["restored_step"] < r["step"] for r in recoveries)
    assert record["status"] == names.STATUS_FINISHED and record["last_step"] == 6
    assert "rolled back to step" in out
