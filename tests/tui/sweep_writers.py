"""A small sweep written by the real writers, in a subprocess (TensorFlow is heavy to import):
TensorFlow's hparams API with tf.summary, tensorboardX's add_hparams (its timestamped sub-run)
and distagent's run.json (its own config loader, planner and run record) beside Keras-style
train/validation parts. Used by the table's CLI and dashboard tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import sys
from pathlib import Path
root, configs = Path(sys.argv[1]), Path(sys.argv[2])
import tensorflow as tf
from tensorboard.plugins.hparams import api as hp
from tensorboardX import SummaryWriter
from distagent.config import config_to_dict, load_config
from distagent.plan import make_plan
from distagent.train.rundir import RunRecord

for name, lr, opt, units in [("tf/a", 0.1, "sgd", 16), ("tf/b", 0.003, "adam", 32),
                             ("tf/c", 0.0005, "adam", 64)]:
    with tf.summary.create_file_writer(str(root / name)).as_default():
        hp.hparams({"lr": lr, "optimizer": opt, "units": units})
        for step in range(20):
            tf.summary.scalar("loss", 1.0 / (step + 1) + lr, step=step)
            tf.summary.scalar("accuracy", 1.0 - 1.0 / (step + 2) - lr, step=step)

for name, lr, opt, bn in [("tbx/x", 0.02, "sgd", True), ("tbx/y", 0.007, "adam", False)]:
    with SummaryWriter(str(root / name)) as w:
        for step in range(30):
            w.add_scalar("loss", 2.0 / (step + 1) + lr, step)
        w.add_hparams({"lr": lr, "optimizer": opt, "bn": bn}, {"hparam/best": 1.0 - lr})

for config, replicas in [("adam_sqrt.toml", 4), ("quickstart.toml", 2)]:
    cfg = load_config(configs / config)
    plan = make_plan(cfg, replicas=replicas, devices=["/cpu:0"] * replicas, num_examples=4096)
    job = root / "agent" / cfg.run.name
    for part, offset in [("train", 0.0), ("validation", 0.1)]:
        with tf.summary.create_file_writer(str(job / part)).as_default():
            for step in range(10):
                tf.summary.scalar("epoch_loss", 1.0 / (step + 1) + offset, step=step)
    RunRecord(job, {"status": "finished", "config": config_to_dict(cfg),
                    "plan": plan.to_json(), "last_step": 9}).update()

# Keras' hparams callback beside its TensorBoard callback, in a logdir of its own.
import keras
import numpy as np
fit = Path(sys.argv[3]) / "fit"
model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=2, verbose=0, validation_split=0.25,
          callbacks=[keras.callbacks.TensorBoard(str(fit)),
                     hp.KerasCallback(str(fit), {"units": 1, "optimizer": "sgd"})])
"""

JOBS = ["agent/adam_sqrt", "agent/quickstart", "tbx/x", "tbx/y", "tf/a", "tf/b", "tf/c"]


def write_sweep(root: Path, keras_root: Path | None = None) -> Path:
    """Write the sweep under `root` (and a Keras fit with its hparams callback under
    `keras_root/fit`, default beside root); skips (pytest) when TensorFlow is not installed."""
    import pytest

    pytest.importorskip("tensorflow", reason="pip install -e .[agent] writes the sweep")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SCRIPT,
            str(root),
            str(REPO / "sample_configs"),
            str(keras_root or root.parent / "keras"),
        ],
        capture_output=True,
        timeout=300,
        env={**__import__("os").environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""},
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return root


def run_json(job: Path) -> dict[str, Any]:
    return dict(json.loads((job / "run.json").read_text()))
