"""Models by name: keras.applications without weights, BatchNorm per replica or synchronized, and
mixed precision and XLA through a real job on CPU replicas."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from distagent.config import config_from_dict
from distagent.model_names import KERAS_APPLICATIONS
from distcore.errors import ConfigError


def test_every_listed_application_exists_in_keras(tf: Any) -> None:
    import keras

    missing = [n for n in KERAS_APPLICATIONS if not callable(getattr(keras.applications, n, None))]
    assert missing == []


@pytest.mark.parametrize("name", ["MobileNetV2", "EfficientNetB0", "ResNet50"])
def test_an_application_gets_the_datas_shape_and_a_float32_logits_head(tf: Any, name: str) -> None:
    from distagent.models import build_model

    model = build_model(name, (32, 32, 3), 7)
    assert tuple(model.input_shape) == (None, 32, 32, 3)
    assert tuple(model.output_shape) == (None, 7)
    assert model.layers[-1].name == "logits" and model.layers[-1].dtype_policy.compute_dtype \
        == "float32"


@pytest.mark.parametrize("sync", [False, True])
def test_batchnorm_is_per_replica_unless_synchronized(tf: Any, sync: bool) -> None:
    import keras

    from distagent.models import build_model

    model = build_model("resnet_small", (16, 16, 3), 4, sync_batchnorm=sync)
    norms = [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]
    assert len(norms) >= 5
    assert {layer.synchronized for layer in norms} == {sync}


def test_an_input_too_small_for_the_network_is_one_line(tf: Any) -> None:
    from distagent.models import build_model

    with pytest.raises(ConfigError, match="MobileNetV2 cannot take input shape") as err:
        build_model("MobileNetV2", (8, 8, 3), 3)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "settings",
    [
        ("train.mixed_precision=true",),
        ("train.jit_compile=true",),
        ("model.sync_batchnorm=true",),
    ],
    ids=["mixed_precision", "jit_compile", "sync_batchnorm"],
)
def test_a_job_trains_with_finite_loss_and_records_the_setting(
    tf: Any, tmp_path: Path, settings: tuple[str, ...]
) -> None:
    from distagent.train import run_job

    cfg = config_from_dict({}, overrides=[
        "strategy.cpu_replicas=2", "model.name=resnet_small", "data.synthetic.num_examples=256",
        "data.synthetic.input_shape=[12,12,3]", "data.per_replica_batch_size=8",
        "train.steps_per_epoch=6", "train.log_every_steps=3", f"run.logdir={tmp_path}",
        "run.name=job", *settings,
    ])
    assert run_job(cfg) == "finished"
    record = json.loads((tmp_path / "job" / "run.json").read_text())
    assert record["last_step"] == 6 and math.isfinite(record["metrics"]["loss"])
    key, _, _ = settings[0].partition("=")
    section, field = key.split(".")
    assert record["config"][section][field] is True
    if section == "train":
        assert record["plan"][field] is True
