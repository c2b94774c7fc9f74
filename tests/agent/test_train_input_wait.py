"""Input wait against ground truth: an input-bound job reads highly input-bound, a compute-bound
job fed from memory reads not input-bound."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from distagent.config import config_from_dict
from distcore import names

pytestmark = pytest.mark.slow


def job(logdir: Path, name: str, *, model: str, optimize: bool, cost_ms: float,
        steps: int, per_replica: int) -> Any:
    return config_from_dict({
        "run": {"name": name, "logdir": str(logdir), "seed": 3},
        "strategy": {"kind": "mirrored", "cpu_replicas": 2},
        "data": {
            "source": "synthetic", "per_replica_batch_size": per_replica,
            "validation_fraction": 0.0, "optimize": optimize,
            "synthetic": {"num_examples": steps * 2 * per_replica, "num_classes": 10,
                          "input_shape": [28, 28, 1], "preprocess_cost_ms": cost_ms},
        },
        "model": {"name": model},
        "optimizer": {"name": "sgd", "base_learning_rate": 0.01},
        "train": {"epochs": 1, "log_every_steps": 4, "checkpoint_every_steps": 0},
    })


def wait_fractions(run_dir: Path) -> list[float]:
    from distcore.events import load_once

    (train,) = [r for r in load_once([run_dir]) if r.name == names.TRAIN_DIR]
    return list(train.scalars[names.INPUT_WAIT_FRACTION].values)


@pytest.mark.parametrize("steps_per_call", [1, 4])
def test_naive_pipeline_with_costly_preprocessing_reads_highly_input_bound(
    tf: Any, tmp_path: Path, steps_per_call: int
) -> None:
    from distagent.train import run_job

    # 32 examples × 8 ms of preprocessing, in sequence, per step of a small MLP (a few ms):
    # at 2 ms, a loaded machine's slower steps gave the input time to keep up (13% waiting).
    cfg = job(tmp_path, "slow_input", model="mlp", optimize=False, cost_ms=8.0, steps=24,
              per_replica=16)
    assert run_job(cfg, steps_per_call=steps_per_call) == names.STATUS_FINISHED
    fractions = wait_fractions(tmp_path / "slow_input")
    # The first call compiles and is not timed: with 4 steps per call, the first log point
    # (step 4) has no timed step and writes no perf tags.
    assert len(fractions) == (6 if steps_per_call == 1 else 5)
    # The first steps eat the batches the input made while the first call compiled; from then
    # on every step waits for its input.
    assert statistics.median(fractions[-3:]) >= names.INPUT_WAIT_HIGH, fractions


def test_compute_bound_cnn_fed_from_memory_reads_not_input_bound(
    tf: Any, tmp_path: Path
) -> None:
    from distagent.train import run_job

    # 64 examples a replica: compute enough per step that a loaded machine's prefetch thread,
    # scheduled late, still has the next batch ready (at 16, 5.4% waited beside two busy loops).
    cfg = job(tmp_path, "fed", model="cnn", optimize=True, cost_ms=0.0, steps=12, per_replica=64)
    assert run_job(cfg) == names.STATUS_FINISHED
    fractions = wait_fractions(tmp_path / "fed")
    assert len(fractions) == 3
    assert statistics.median(fractions) < names.INPUT_WAIT_MODERATE, fractions
