"""A recovering job always ends, through the real `distagent start`: every recovery key is
bounded (the file and dotted key in one line, exit 2; generated values through the
config reader, the reported ones through `start`), a job that diverges at every boundary
still stops on `distagent stop`, and a resume from a truncated checkpoint is one line naming
the data file with run.json saying `failed`."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distagent.cli import error_text
from distagent.config import load_config
from distcore import names
from distcore.errors import ConfigErrors
from tests.kit.wait import wait_until

DISTAGENT = str(Path(sys.executable).parent / "distagent")  # the console script users run
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def job(logdir: Path, name: str, **train: Any) -> dict[str, Any]:
    optimizer = train.pop("optimizer", {})
    return {
        "run": {"name": name, "logdir": str(logdir), "seed": 3},
        "strategy": {"kind": "one_device"},
        "data": {"source": "synthetic", "per_replica_batch_size": 8, "validation_fraction": 0.0,
                 "synthetic": {"num_examples": 64, "num_classes": 3, "input_shape": [4]}},
        "model": {"name": "mlp", "hidden_units": [8]},
        "optimizer": {"name": "sgd", "base_learning_rate": 0.1, **optimizer},
        "train": {"epochs": 1, "steps_per_epoch": 6, "log_every_steps": 2,
                  "checkpoint_every_steps": 3, **train},
    }


def write(path: Path, raw: dict[str, Any]) -> Path:
    path.write_text(tomli_w.dumps(raw))
    return path


def start(config: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DISTAGENT, "start", str(config), *args], capture_output=True,
                          text=True, env=ENV, timeout=timeout, stdin=subprocess.DEVNULL,
                          cwd=config.parent)


def record(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / names.RUN_JSON).read_text()))


NOT_AN_INT = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                       st.text(max_size=5))
BAD_COUNT = st.one_of(st.integers(101, 2**63 - 1), st.integers(-(2**63), -1), NOT_AN_INT)
BAD_FACTOR = st.one_of(st.floats(min_value=0, max_value=0.001, exclude_max=True),
                       st.floats(min_value=1, exclude_min=True, allow_infinity=False),
                       st.floats(max_value=0, allow_infinity=False), st.text(max_size=5))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(["max_recoveries", "recovery_lr_factor"]), data=st.data())
def test_an_unbounded_recovery_key_is_one_line_naming_file_and_key(
    tmp_path_factory: pytest.TempPathFactory, key: str, data: st.DataObject
) -> None:
    """The file as `start` reads it (the real CLI takes the same path, below, per value)."""
    value = data.draw(BAD_COUNT if key == "max_recoveries" else BAD_FACTOR)
    folder = tmp_path_factory.mktemp("cfg")
    config = write(folder / "config.toml", job(folder, "x", on_divergence="rollback",
                                               **{key: value}))
    with pytest.raises(ConfigErrors) as caught:
        load_config(config)
    (line,) = error_text(caught.value).splitlines()
    assert line.startswith(f"distagent: config.toml: train.{key}: expected "), line


@pytest.mark.parametrize(("train", "message"), [
    ({"max_recoveries": 10**18}, "train.max_recoveries: expected an integer from 0 to 100, "
                                 "got 1000000000000000000"),
    ({"max_recoveries": 1e18}, "train.max_recoveries: expected an integer, got 1e+18"),
    ({"recovery_lr_factor": 1e-320}, "train.recovery_lr_factor: expected a number in "
                                     "[0.001, 1], got 1e-320"),
    # Each in range, together a rate of 0 after the last rollback (the scale is float32).
    ({"max_recoveries": 100, "recovery_lr_factor": 0.01},
     "train.recovery_lr_factor: expected base_learning_rate × recovery_lr_factor ** "
     "max_recoveries >= 1e-30, got 1e-201 (the last rollback would leave a learning rate of 0)"),
])
def test_the_issue_s_values_are_refused(tmp_path: Path, train: dict[str, Any],
                                        message: str) -> None:
    config = write(tmp_path / "config.toml", job(tmp_path, "x", on_divergence="rollback",
                                                 **train))
    done = start(config, timeout=60)
    assert (done.returncode, done.stderr) == (2, f"distagent: config.toml: {message}\n")


def test_the_floor_holds_only_for_rollback_and_at_its_edge(tmp_path: Path) -> None:
    from distagent.config import config_from_dict

    edge = {"max_recoveries": 100, "recovery_lr_factor": 0.5}  # 0.1 × 0.5**100 = 7.9e-32
    with pytest.raises(Exception, match="1e-30"):
        config_from_dict(job(tmp_path, "x", on_divergence="rollback", **edge))
    config_from_dict(job(tmp_path, "x", on_divergence="stop", **edge))  # never rolls back
    cfg = config_from_dict(job(tmp_path, "x", on_divergence="rollback", max_recoveries=100,
                               recovery_lr_factor=0.6))
    assert math.isclose(cfg.train.recovery_lr_factor, 0.6)


def recoveries(run_dir: Path) -> int:
    try:
        return len(record(run_dir).get("recoveries") or [])
    except (OSError, ValueError):
        return 0


@pytest.mark.slow
def test_a_job_that_diverges_at_every_boundary_stops_on_distagent_stop(tmp_path: Path) -> None:
    """One real job (about 6 s): a loss bound below any loss makes every step diverge, so the
    job only rolls back; before the stop flag won over the rollback it ran all 100 tries."""
    config = write(tmp_path / "config.toml", job(
        tmp_path, "loops", on_divergence="rollback", max_recoveries=100, recovery_lr_factor=1.0,
        loss_upper_bound=1e-6, steps_per_epoch=1_000_000, steps_per_execution=1))
    proc = subprocess.Popen([DISTAGENT, "start", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=tmp_path,
                            stdin=subprocess.DEVNULL)
    run_dir = tmp_path / "loops"
    try:
        wait_until(lambda: recoveries(run_dir) >= 2 or proc.poll() is not None, "two rollbacks",
                   180)
        stopped = subprocess.run([DISTAGENT, "stop", str(run_dir), "--timeout", "60"],
                                 capture_output=True, text=True, env=ENV, timeout=90)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert stopped.returncode == 0, stopped.stderr
    assert proc.returncode == 0, err[-3000:]
    final = record(run_dir)
    assert final["status"] == names.STATUS_STOPPED, final.get("error")
    assert final["message"] == "stopped by SIGTERM"
    assert 2 <= len(final["recoveries"]) < 100
    # The stop lands on a restored (good) step, whose checkpoint is the newest.
    assert final["last_step"] == final["recoveries"][-1]["restored_step"]
    assert f"stopped at step {final['last_step']}/" in out + err


@pytest.mark.slow
def test_a_truncated_checkpoint_is_one_line_and_a_failed_run(tf: Any, tmp_path: Path) -> None:
    """Trains 6 steps in process, then one real `start` resumes from the cut checkpoint."""
    from distagent.config import config_from_dict
    from distagent.train import run_job

    raw = job(tmp_path, "cut")
    assert run_job(config_from_dict(raw)) == names.STATUS_FINISHED
    ckpt = tmp_path / "cut" / names.CHECKPOINT_DIR
    (data,) = ckpt.glob("ckpt-6.data-*")
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 3])
    raw["train"]["steps_per_epoch"] = 12  # more steps to train: a resume
    done = start(write(tmp_path / "config.toml", raw))
    line = (f"{data}: truncated or corrupt (Read less bytes than requested); cannot resume "
            f"from {ckpt}/ckpt-6: use another run.name or remove {ckpt}")
    assert (done.returncode, done.stderr) == (2, f"distagent: {line}\n")
    final = record(tmp_path / "cut")
    assert final["status"] == names.STATUS_FAILED and final["error"] == line
    assert final["last_step"] == 6 and final["resumed_from"] is not None
