"""A real `distagent start` that diverges writes the non-finite loss where it happened, and a
user model ("module:function") resolves from the current directory in the foreground and with
--detach. Real processes started through the console script, read back by TensorBoard itself."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distcore import names
from tests.kit.wait import wait_until

pytestmark = pytest.mark.slow

QUICKSTART = Path(__file__).resolve().parents[2] / "sample_configs" / "quickstart.toml"
DISTAGENT = str(Path(sys.executable).parent / "distagent")  # the console script users run
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
SMALL = {
    "strategy.cpu_replicas": 2, "data.per_replica_batch_size": 16,
    "data.validation_fraction": 0.0, "data.synthetic.num_examples": 640,
    "data.synthetic.input_shape": "[8, 8, 1]", "model.hidden_units": "[16]",
    "train.epochs": 1, "train.log_every_steps": 5,
}


def sets(**settings: Any) -> list[str]:
    merged = {**SMALL, **{k.replace("__", "."): v for k, v in settings.items()}}
    return [arg for key, value in merged.items() for arg in ("--set", f"{key}={value}")]


def record(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / names.RUN_JSON).read_text()))


def test_a_diverged_job_writes_its_non_finite_loss(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    done = subprocess.run(
        [DISTAGENT, "start", str(QUICKSTART),
         *sets(run__logdir=tmp_path, run__name="boom", optimizer__base_learning_rate=1e30,
               telemetry__simulate_gpus=2, telemetry__interval_seconds=0.2)],
        capture_output=True, text=True, env=ENV, timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    run_dir = tmp_path / "boom"
    final = record(run_dir)
    assert final["status"] == names.STATUS_DIVERGED
    bad = final["error_step"]
    assert isinstance(bad, int) and 1 <= bad <= final["last_step"]
    assert final["error"] == f"loss became NaN or infinite at step {bad}"

    events = EventAccumulator(str(run_dir / names.TRAIN_DIR))
    events.Reload()
    losses = {e.step: float(tensor_util.make_ndarray(e.tensor_proto))
              for e in events.Tensors(names.LOSS)}
    assert not math.isfinite(losses[bad])  # the point the run stopped for
    assert max(losses) == bad and all(math.isfinite(v) for s, v in losses.items() if s < bad)

    # The same job's system run: simulated GPUs, labelled with the host.
    from distcore.events import load_once

    system = {r.name: r for r in load_once([tmp_path])}[f"boom/{names.SYSTEM_DIR}"]
    assert system.hparams["simulated_gpus"] == 2 and "worker" not in system.hparams
    assert names.gpu_tag(1, "utilization") in system.scalars


USER_MODEL = '''
import keras

def build(input_shape, num_classes):
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Flatten()(inputs)
    return keras.Model(inputs, keras.layers.Dense(num_classes, name="from_cwd")(x))
'''


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detach"])
def test_a_user_model_resolves_from_the_current_directory(tmp_path: Path, detach: bool) -> None:
    module = f"cwd_model_{'bg' if detach else 'fg'}"
    (tmp_path / f"{module}.py").write_text(USER_MODEL)
    command = [DISTAGENT, "start", str(QUICKSTART),
               *sets(run__logdir=tmp_path / "runs", run__name="user",
                     model__name=f"{module}:build"), *(["--detach"] if detach else [])]
    done = subprocess.run(command, capture_output=True, text=True, env=ENV, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "runs" / "user"
    wait_until(lambda: record(run_dir).get("status") != names.STATUS_RUNNING, "the job's end",
               300, every=0.2)
    final = record(run_dir)
    assert final["status"] == names.STATUS_FINISHED, final.get("traceback")
    assert final["config"]["model"]["name"] == f"{module}:build"
