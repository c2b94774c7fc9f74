"""Recovery from divergence on real CPU replicas: a far too high learning rate rolls back to the
last good checkpoint with a lower rate and finishes; when the tries run out the run ends
`diverged`; the config keys are validated with file and dotted key."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distagent.config import config_from_dict
from distagent.train.progress import Progress
from distcore import names
from distcore.errors import ConfigErrors

GLOBAL_BATCH = 32
DISTMON = str(Path(sys.executable).parent / "distmon")  # the console script users run
TOTAL = 20


def job(logdir: Path, name: str, **train: Any) -> Any:
    optimizer = train.pop("optimizer", {})
    raw = {
        "run": {"name": name, "logdir": str(logdir), "seed": 7},
        "strategy": {"kind": "mirrored", "cpu_replicas": 2},
        # A fixed element order: at a rate of 600 the path a run takes hangs on the order of
        # its first batches, which parallel maps otherwise let the machine's load decide.
        "data": {
            "source": "synthetic", "per_replica_batch_size": 16, "validation_fraction": 0.0,
            "deterministic": True,
            "synthetic": {"num_examples": 640, "num_classes": 4, "input_shape": [8]},
        },
        "model": {"name": "mlp", "hidden_units": [16]},
        "optimizer": {"name": "sgd", "base_learning_rate": 300.0, **optimizer},
        "train": {"epochs": 1, "steps_per_epoch": TOTAL, "log_every_steps": 2,
                  "checkpoint_every_steps": 4, **train},
    }
    return config_from_dict(raw)


def run_json(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / names.RUN_JSON).read_text()))


def train_scalars(run_dir: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(run_dir / names.TRAIN_DIR), size_guidance={"tensors": 0})
    acc.Reload()
    return {tag: {e.step: float(tensor_util.make_ndarray(e.tensor_proto))
                  for e in acc.Tensors(tag)} for tag in acc.Tags()["tensors"]}


@pytest.mark.slow
def test_a_far_too_high_rate_rolls_back_and_finishes(tf: Any, tmp_path: Path) -> None:
    from distagent.train import run_job

    out = io.StringIO()
    cfg = job(tmp_path, "rb", on_divergence="rollback", recovery_lr_factor=0.01,
              loss_upper_bound=20.0)
    status = run_job(cfg, progress=Progress(out, tty=False, min_interval=0))
    assert status == names.STATUS_FINISHED, out.getvalue()
    record = run_json(tmp_path / "rb")
    recoveries = record["recoveries"]
    assert 1 <= len(recoveries) <= 3
    for number, rec in enumerate(recoveries, start=1):
        assert rec["restored_step"] < rec["step"]
        assert rec["lr_after"] == pytest.approx(rec["lr_before"] * 0.01, rel=1e-5)
        assert rec["reason"] in ("nan", "inf", "above_bound", "gradient")
        assert f"recovery {number} of 3" in out.getvalue()
    assert record["status"] == names.STATUS_FINISHED and record["last_step"] == TOTAL
    assert math.isfinite(record["metrics"][names.LOSS]) and record["metrics"][names.LOSS] < 20
    # The run goes on at the lower rate, and every recovery is in the events.
    assert record["metrics"][names.LEARNING_RATE] == pytest.approx(recoveries[-1]["lr_after"])
    scalars = train_scalars(tmp_path / "rb")
    assert scalars[names.RECOVERIES] == {
        rec["step"]: float(i) for i, rec in enumerate(recoveries, start=1)}
    assert all(math.isfinite(v) and v >= 0 for v in scalars[names.GRAD_NORM].values())
    # Resumed from its checkpoint, the run keeps the lowered rate (it is checkpointed).
    ckpt = tf.train.load_checkpoint(str(tmp_path / "rb" / names.CHECKPOINT_DIR))
    scale = [k for k in ckpt.get_variable_to_shape_map() if k.startswith("lr_scale")]
    assert scale and ckpt.get_tensor(scale[0]) == pytest.approx(0.01 ** len(recoveries))
    # The ledger: the steps each rollback discarded, and the rollbacks, are recovery.
    ledger, wall = record["ledger"], record["ledger_wall"]
    assert ledger["recovery"] > 0 and ledger["lost"] == 0 and ledger["compute"] > 0
    assert sum(ledger.values()) == pytest.approx(wall, abs=1e-3)
    # A job of ~2 s: the log points' own writes (unknown) weigh more than in a real job, whose
    # share test_cli_runs and bench/ledger.py hold to 5%.
    assert 0 <= ledger["unknown"] <= 0.25 * wall, ledger
    # distmon reads run.json's recoveries: one warning each, in `--once --json`.
    done = subprocess.run([DISTMON, "--once", "--json", "--no-gpu", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    shown = [a["message"] for a in doc["alerts"] if a["kind"] == "recovered"]
    (shown_job,) = doc["jobs"]
    assert shown_job["ledger"]["seconds"] == pytest.approx(ledger, abs=1e-5)
    first = recoveries[0]
    assert len(shown) == len(recoveries)
    assert shown[0].startswith(f"recovered from divergence at step {first['step']} "
                               f"(lr {first['lr_before']:.4g} → {first['lr_after']:.4g})")


@pytest.mark.slow
def test_with_no_bound_given_a_loss_far_above_the_first_is_a_divergence(
    tf: Any, tmp_path: Path
) -> None:
    """No loss_upper_bound: the bound is loss_bound_factor × the first logged loss, said once,
    kept in run.json, and a loss above it ends the run diverged (a rate this high makes the
    loss climb, finite, past twice its first value within a few steps)."""
    from distagent.train import run_job

    out = io.StringIO()
    cfg = job(tmp_path, "far", loss_bound_factor=2.0, optimizer={"base_learning_rate": 30.0})
    status = run_job(cfg, progress=Progress(out, tty=False, min_interval=0))
    record = run_json(tmp_path / "far")
    bound = record["loss_bound"]
    first = train_scalars(tmp_path / "far")[names.LOSS][2]  # the first log point
    assert bound == pytest.approx(2.0 * max(abs(first), 1.0), rel=1e-6)
    assert out.getvalue().count("loss bound: ") == 1, out.getvalue()
    assert status == names.STATUS_DIVERGED, out.getvalue()
    assert f"above loss_upper_bound {bound:g}" in record["error"], record["error"]


@pytest.mark.parametrize(("first", "factor", "bound"), [
    (2.3, 1000.0, 2300.0), (0.01, 1000.0, 1000.0), (-5.0, 1000.0, 5000.0), (1.5, 2.0, 3.0),
    (math.nan, 1000.0, None), (math.inf, 1000.0, None), (2.3, 0.0, None),
])
def test_the_relative_bound(first: float, factor: float, bound: float | None) -> None:
    from distagent.train.recovery import relative_bound

    assert relative_bound(first, factor) == (pytest.approx(bound) if bound else None)


@pytest.mark.slow
def test_when_the_tries_run_out_the_run_ends_diverged(tf: Any, tmp_path: Path) -> None:
    from distagent.train import run_job

    cfg = job(tmp_path, "out", on_divergence="rollback", recovery_lr_factor=1.0,
              max_recoveries=1, optimizer={"base_learning_rate": 1e30})
    assert run_job(cfg) == names.STATUS_DIVERGED
    record = run_json(tmp_path / "out")
    assert len(record["recoveries"]) == 1 and record["recoveries"][0]["loss"] is None
    assert record["error"].endswith("(after 1 recovery)")
    assert record["error_step"] >= 1


@pytest.mark.parametrize(("train", "key", "expected"), [
    ({"on_divergence": "retry"}, "train.on_divergence", '"stop", "rollback" or "continue"'),
    ({"max_recoveries": -1}, "train.max_recoveries", "an integer from 0 to 100"),
    ({"recovery_lr_factor": 0.0}, "train.recovery_lr_factor", "a number in [0.001, 1]"),
    ({"recovery_lr_factor": 2}, "train.recovery_lr_factor", "a number in [0.001, 1]"),
    ({"loss_upper_bound": -1.0}, "train.loss_upper_bound", "a number >= 0"),
    ({"loss_upper_bound": "big"}, "train.loss_upper_bound", "a number"),
    ({"loss_bound_factor": 1.5}, "train.loss_bound_factor", "0 (no bound) or a number >= 2"),
    ({"loss_bound_factor": -1}, "train.loss_bound_factor", "0 (no bound) or a number >= 2"),
    ({"loss_bound_factor": math.inf}, "train.loss_bound_factor", "0 (no bound) or a number"),
    ({"histogram_every_steps": -5}, "train.histogram_every_steps", "an integer >= 0"),
    ({"stop_on_nan": False, "on_divergence": "rollback"}, "train.stop_on_nan", "continue"),
    ({"optimizer": {"clip_norm": -1}}, "optimizer.clip_norm", "a number >= 0"),
])
def test_bad_health_keys_name_the_file_and_key(tmp_path: Path, train: dict[str, Any], key: str,
                                               expected: str) -> None:
    with pytest.raises(ConfigErrors) as caught:
        job(tmp_path, "bad", **train)
    lines = str(caught.value).splitlines()
    assert any(key in line and expected in line and "<config>" in line for line in lines), lines


@pytest.mark.parametrize(("on_divergence", "stop_on_nan", "action"), [
    ("stop", True, "stop"), ("rollback", True, "rollback"), ("continue", True, "continue"),
    ("stop", False, "continue"),
])
def test_the_action_in_force(on_divergence: str, stop_on_nan: bool, action: str) -> None:
    from distagent.train.recovery import divergence_action

    assert divergence_action(on_divergence, stop_on_nan) == action


@pytest.mark.parametrize(("loss", "bound", "reason"), [
    (math.nan, 0.0, "nan"), (math.inf, 10.0, "inf"), (-math.inf, 0.0, "inf"),
    (50.0, 10.0, "above_bound"), (5.0, 10.0, "gradient"), (5.0, 0.0, "gradient"),
])
def test_divergence_reasons(loss: float, bound: float, reason: str) -> None:
    from distagent.train.recovery import divergence_reason

    assert divergence_reason(loss, bound) == reason


@pytest.mark.parametrize(("loss", "bound", "message"), [
    (math.nan, 0.0, "loss became NaN or infinite at step 7"),
    (math.inf, 5.0, "loss became NaN or infinite at step 7"),
    (12.5, 5.0, "loss 12.5 above loss_upper_bound 5 at step 7"),
    (1.25, 5.0, "gradient norm became NaN or infinite at step 7 (loss 1.25)"),
])
def test_divergence_messages(loss: float, bound: float, message: str) -> None:
    from distagent.train.recovery import divergence_message

    assert divergence_message(7, loss, bound) == message
