"""A job's validation loss is judged against its own history and noise, never against training:
the demo's healthy job (a tiny validation set whose loss swings 1.5-5.5 while training falls
smoothly, accuracy 0.43 against 0.95) raises nothing; an evaluation that breaks far outside its
history is a warning, never critical; the same swings in a training loss still alert."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from distmon.once import run_once
from distmon.options import Options
from tests.kit.writers import write_scalars

# The demo's healthy job (sample_configs/images.toml, 18 epochs, 256 validation images), its
# validation epoch_loss as written: the spike at epoch 9 was a loss_spike that flapped to critical.
DEMO_VALIDATION = [2.310, 1.631, 1.710, 1.472, 2.015, 1.650, 2.214, 1.935, 1.714, 5.551, 4.360,
                   1.923, 3.332, 3.612, 2.241, 3.985, 2.212, 2.420]  # fmt: skip
DEMO_TRAIN = [2.2 * 0.88**i for i in range(18)]
EPOCH_LOSS, EPOCH_SECONDS = "epoch_loss", 6.0  # one point an epoch, as Keras writes it


def _alerts(logdir: Path) -> list[dict[str, Any]]:
    out = io.StringIO()
    assert run_once(Options(logdirs=(logdir,), json=True, once=True, no_gpu=True), out) == 0
    return list(json.loads(out.getvalue())["alerts"])


def _job(logdir: Path, validation: list[float]) -> None:
    start = time.time() - 6 * len(validation)
    write_scalars(logdir / "job" / "train", DEMO_TRAIN[: len(validation)], start, EPOCH_LOSS,
                  EPOCH_SECONDS)
    write_scalars(logdir / "job" / "validation", validation, start, EPOCH_LOSS, EPOCH_SECONDS)
    (logdir / "job" / "run.json").write_text(json.dumps({"status": "running"}))


@pytest.mark.parametrize("epochs", [10, 11, 13, 18])  # each refresh of the demo's run
def test_the_demos_noisy_validation_raises_nothing(tmp_path: Path, epochs: int) -> None:
    _job(tmp_path, DEMO_VALIDATION[:epochs])
    assert _alerts(tmp_path) == []


def test_an_evaluation_far_outside_its_history_is_a_warning(tmp_path: Path) -> None:
    _job(tmp_path, [*DEMO_VALIDATION[:9], 60.0, 55.0])  # stays up: still a warning only
    (alert,) = _alerts(tmp_path)
    assert (alert["kind"], alert["severity"], alert["run"]) == ("loss_spike", "warning",
                                                               "job/validation")  # fmt: skip
    assert alert["message"].startswith("validation loss spike: epoch_loss 60 at step 9 is ")


def test_the_same_swings_in_a_training_loss_still_alert(tmp_path: Path) -> None:
    write_scalars(tmp_path / "lone", DEMO_VALIDATION[:11], time.time() - 66, EPOCH_LOSS,
                  EPOCH_SECONDS)
    assert [(a["kind"], a["severity"]) for a in _alerts(tmp_path)] == [("loss_spike", "critical")]
