"""Every file in sample_configs/ loads and plans, as `distagent plan` would do it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distagent.config import load_config
from distagent.data.tfrecord import parse_spec, write_examples
from distagent.devices import resolve_strategy
from distagent.pipeline import plan_for
from distagent.plan import scaled_learning_rate
from distagent.schema import JobConfig

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "sample_configs").glob("*.toml"))


def _data_for(cfg: JobConfig, tmp_path: Path) -> list[str]:
    """Overrides pointing file-based sources at small files written here."""
    if cfg.data.source == "images":  # as many as `python -m distagent.data.samples` writes
        from distagent.data.samples import ring_images, write_image_folders

        images, labels = ring_images(1280, 10, 16, seed=0)
        write_image_folders(tmp_path / "images", images, labels)
        return [f"data.images.directory={tmp_path}/images"]
    if cfg.data.source != "tfrecord":
        return []
    _, shape = parse_spec(dict(cfg.data.tfrecord.features)["image"])
    x = np.zeros((1024, *shape), dtype=np.float32)
    write_examples(tmp_path / "train", x, np.arange(1024) % 10, num_files=4)
    return [f"data.tfrecord.files={tmp_path}/train-*.tfrecord"]


def test_there_are_sample_configs() -> None:
    assert len(SAMPLES) >= 4


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_sample_config_loads_and_plans(tf: Any, path: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # user code (examples/) is imported from the current directory
    cfg = load_config(path)
    cfg = load_config(path, _data_for(cfg, tmp_path))
    setup = resolve_strategy(cfg.strategy)
    plan = plan_for(cfg, replicas=setup.replicas, devices=setup.devices, workers=setup.workers)
    assert plan.replicas == setup.replicas >= 1
    assert plan.global_batch_size == cfg.data.per_replica_batch_size * setup.replicas
    expected = scaled_learning_rate(cfg.optimizer.base_learning_rate, plan.base_batch_size,
                                    plan.global_batch_size, cfg.optimizer.scaling)
    assert math.isclose(plan.learning_rate, expected)
    # A generator's size is unknown: its config says what an epoch is, and nothing is held out.
    assert plan.steps_per_epoch >= 1 and (plan.validation_steps >= 1 or (
        plan.num_examples is None and cfg.train.steps_per_epoch > 0))
    if cfg.data.source == "python":  # the user's model is built and checked against its data
        from distagent.data import open_source
        from distagent.model_check import check_job

        assert check_job(cfg, open_source(cfg)) is not None  # its FLOPs counted
    # Samples are examples to copy: none of them should trip the plan's own warnings, but the
    # one that blows up on purpose (no warmup under a scaled-up rate).
    wanted = ("no warmup",) if path.stem == "recovery" else ()
    assert tuple(w for w in wanted if any(w in line for line in plan.warnings)) == wanted
    assert len(plan.warnings) == len(wanted), plan.warnings


@pytest.mark.slow
def test_the_recovery_sample_recovers_as_the_docs_say(tmp_path: Path) -> None:
    """`distagent start sample_configs/recovery.toml` (one epoch of it here) diverges, rolls
    back, finishes, and `distmon --once` shows the recovery."""
    sample = next(p for p in SAMPLES if p.stem == "recovery")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, "-m", "distagent", "start", str(sample), "--set",
                           f"run.logdir={tmp_path}", "--set", "train.epochs=1"], env=env,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rolled back to step" in done.stdout + done.stderr
    record = json.loads((tmp_path / "recovery" / "run.json").read_text())
    assert record["status"] == "finished" and len(record["recoveries"]) >= 1
    shown = subprocess.run([sys.executable, "-m", "distmon", "--once", "--no-gpu",
                            str(tmp_path)], env=env, capture_output=True, text=True, timeout=120,
                           check=True)  # fmt: skip
    assert "recovered from divergence at step" in shown.stdout
