"""The training loop on real CPU replicas: the same maths as one device, every tag at its step,
divergence, and a stop + resume that continues exactly where it stopped."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distagent.config import config_from_dict
from distagent.train.progress import Progress
from distcore import names

pytestmark = pytest.mark.slow

GLOBAL_BATCH = 32
STEPS_PER_EPOCH = 10  # 400 examples, 80 held out for validation: 320 / 32
TOTAL = 2 * STEPS_PER_EPOCH
LOG_STEPS = [3, 6, 9, 12, 15, 18, 20]  # every 3 steps, and the last


def job(logdir: Path, name: str, *overrides: str, **train: Any) -> Any:
    raw = {
        "run": {"name": name, "logdir": str(logdir), "seed": 7},
        "strategy": {"kind": "mirrored", "cpu_replicas": 2},
        "data": {
            "source": "synthetic", "per_replica_batch_size": 16, "validation_fraction": 0.2,
            "deterministic": True,
            "synthetic": {"num_examples": 400, "num_classes": 4, "input_shape": [8]},
        },
        "model": {"name": "mlp"},
        "optimizer": {"name": "momentum", "base_learning_rate": 0.05, "warmup_epochs": 1},
        "train": {"epochs": 2, "log_every_steps": 3, "checkpoint_every_steps": 4, **train},
    }
    return config_from_dict(raw, overrides=overrides)


class StopAt(Progress):
    """Asks the run to stop, as SIGTERM would, at the first log point at or after `step`."""

    def __init__(self, step: int) -> None:
        super().__init__(io.StringIO(), tty=False)
        self.step = step
        self.stop: Any = None

    def update(self, step: int, total: int, epoch: int, epochs: int, scalars: Any) -> None:
        if step >= self.step:
            self.stop.request("test")


def checkpoint_arrays(run_dir: Path) -> dict[str, np.ndarray]:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(run_dir / names.CHECKPOINT_DIR))
    return {
        key: reader.get_tensor(key)
        for key in reader.get_variable_to_shape_map()
        # Every variable: weights, optimizer slots and step counters (not the save count).
        if not key.startswith(("save_counter", "_CHECKPOINTABLE"))
    }


@pytest.fixture(scope="module")
def finished_run(tf: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from distagent.train import run_job

    logdir = tmp_path_factory.mktemp("runs")
    assert run_job(job(logdir, "full")) == names.STATUS_FINISHED
    return logdir / "full"


def test_two_replicas_end_with_the_weights_of_one_device(tf: Any, cpu_devices: list[str]) -> None:
    import keras

    from distagent.models import build_model
    from distagent.train.steps import TrainState, TrainStep

    rng = np.random.default_rng(0)
    x = rng.normal(size=(6 * GLOBAL_BATCH, 8)).astype("float32")
    y = rng.integers(0, 4, size=6 * GLOBAL_BATCH)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH, drop_remainder=True)
    keras.utils.set_random_seed(1)
    initial = build_model("mlp", (8,), 4).get_weights()

    def train(strategy: Any) -> tuple[list[np.ndarray], float]:
        with strategy.scope():
            model = build_model("mlp", (8,), 4)
            model.set_weights(initial)
            optimizer = keras.optimizers.SGD(0.1)
        state = TrainState.create()
        step = TrainStep(strategy, model, optimizer, state, global_batch_size=GLOBAL_BATCH)
        iterator = iter(strategy.experimental_distribute_dataset(data))
        step(iterator, 2)  # an inner loop of two steps,
        for _ in range(4):  # then one step per call
            step(iterator, 1)
        return model.get_weights(), state.read(state.epoch)["loss_sum"]

    mirrored = tf.distribute.MirroredStrategy(
        cpu_devices[:2], cross_device_ops=tf.distribute.ReductionToOneDevice()
    )
    two, two_loss = train(mirrored)
    one, one_loss = train(tf.distribute.OneDeviceStrategy(cpu_devices[0]))
    assert any(not np.allclose(a, b) for a, b in zip(one, initial, strict=True))
    for a, b in zip(two, one, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert two_loss == pytest.approx(one_loss, rel=1e-5)


def _scalars(path: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(path), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    out: dict[str, list[tuple[int, float]]] = {}
    for tag in acc.Tags()["tensors"]:
        out[tag] = [(e.step, float(np.asarray(tf_value(e.tensor_proto)))) for e in
                    acc.Tensors(tag)]
    return out


def tf_value(proto: Any) -> Any:
    from tensorboard.util import tensor_util

    return tensor_util.make_ndarray(proto)


def test_every_tag_at_its_step_read_by_tensorboard(finished_run: Path) -> None:
    train = _scalars(finished_run / names.TRAIN_DIR)
    for tag in names.TRAINING_TAGS:
        assert [s for s, _ in train[tag]] == LOG_STEPS, tag
    for tag in names.EPOCH_TAGS:
        assert [s for s, _ in train[tag]] == [0, 1], tag
    validation = _scalars(finished_run / names.VALIDATION_DIR)
    assert {t: [s for s, _ in v] for t, v in validation.items()} == {
        names.EPOCH_LOSS: [0, 1], names.EPOCH_ACCURACY: [0, 1]
    }
    # Warmup: 0.05 at batch 16 -> 0.1 at 32 (linear) over the first epoch's 10 steps; the
    # rate logged at step s is the one step s trained with (schedule at s - 1).
    rates = dict(train[names.LEARNING_RATE])
    assert rates[3] == pytest.approx(0.05 + 0.05 * 2 / 10)
    assert rates[12] == pytest.approx(0.1)
    fractions = [v for _, v in train[names.INPUT_WAIT_FRACTION]]
    assert all(0.0 <= f <= 1.0 for f in fractions)


def test_run_json_and_checkpoints_of_a_finished_run(finished_run: Path) -> None:
    record = json.loads((finished_run / names.RUN_JSON).read_text())
    assert record["status"] == names.STATUS_FINISHED
    assert record["last_step"] == TOTAL
    assert record["plan"]["global_batch_size"] == GLOBAL_BATCH
    assert record["config"]["train"]["log_every_steps"] == 3
    assert record["end_time"] >= record["start_time"]
    assert record["error"] is None
    assert names.LOSS in record["metrics"]
    # Saved at 4, 8, 10 (epoch end), 12, 16, 20; the newest three are kept.
    saved = sorted(int(p.stem.split("-")[1])
                   for p in (finished_run / names.CHECKPOINT_DIR).glob("*.index"))
    assert saved == [12, 16, 20]
    assert (finished_run / names.SYSTEM_DIR).is_dir()


def test_stop_then_resume_trains_each_step_once(
    finished_run: Path, tmp_path: Path
) -> None:
    from distagent.train import run_job
    from distagent.train.signals import StopRequest
    from distcore.events import load_once

    progress = StopAt(12)
    stop = StopRequest()
    progress.stop = stop
    cfg = job(tmp_path, "resumed")
    assert run_job(cfg, progress=progress, stop=stop) == names.STATUS_STOPPED
    record = json.loads((tmp_path / "resumed" / names.RUN_JSON).read_text())
    # Asked at the log point of step 12 (as a signal arriving then): honoured after the next
    # step, with a log point and a checkpoint at 13.
    assert (record["status"], record["last_step"]) == (names.STATUS_STOPPED, 13)
    assert record["message"] == "stopped by test"

    assert run_job(cfg) == names.STATUS_FINISHED
    record = json.loads((tmp_path / "resumed" / names.RUN_JSON).read_text())
    assert record["resumed_from"].endswith("ckpt-13")
    # The same weights as the run that never stopped: same data, in the same order, once.
    full, resumed = checkpoint_arrays(finished_run), checkpoint_arrays(tmp_path / "resumed")
    assert full.keys() == resumed.keys() and len(full) > 6
    assert resumed["step/.ATTRIBUTES/VARIABLE_VALUE"] == TOTAL
    assert resumed["optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"] == TOTAL
    for key in full:
        np.testing.assert_allclose(resumed[key], full[key], rtol=1e-5, atol=1e-6, err_msg=key)
    (run,) = [r for r in load_once([tmp_path]) if r.name == "resumed/train"]
    assert list(run.scalars[names.LOSS].steps) == sorted({*LOG_STEPS, 13})


def test_nan_loss_stops_a_bare_run_as_diverged(
    tf: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run with the benchmarks' switch (train/bare.py): a divergence is found as ever, and the
    job leaves no heartbeat, ledger, system samples, `time/` or in-graph timing tags."""
    from distagent.train import run_job
    from distagent.train.bare import BARE_ENV

    monkeypatch.setenv(BARE_ENV, "1")
    cfg = job(tmp_path, "nan", "optimizer.name=sgd", "optimizer.base_learning_rate=1e30",
              epochs=1)
    assert run_job(cfg) == names.STATUS_DIVERGED
    run_dir = tmp_path / "nan"
    record = json.loads((run_dir / names.RUN_JSON).read_text())
    assert record["status"] == names.STATUS_DIVERGED
    assert "NaN or infinite at step" in record["error"]
    bad_step = int(record["error"].rsplit(" ", 1)[-1])
    saved = [int(p.stem.split("-")[1]) for p in (run_dir / "checkpoints").glob("*.index")]
    assert all(step < bad_step for step in saved)
    assert "ledger" not in record and "workers" not in record
    assert not any((run_dir / p).exists() for p in
                   (names.heartbeat_name(0), "ledger", names.SYSTEM_DIR))
    tags = set(_scalars(run_dir / names.TRAIN_DIR))
    assert names.LOSS in tags and names.STEP_TIME_MS in tags
    assert not [t for t in tags if t.startswith("time/")]
    assert not tags & {names.INPUT_WAIT_MS, names.INPUT_WAIT_FRACTION,
                       names.STEP_COMPUTE_SECONDS, names.REDUCE_WAIT_SECONDS}


def test_a_checkpoint_of_another_model_is_refused_in_one_line(
    finished_run: Path, tmp_path: Path
) -> None:
    from distagent.train import run_job
    from distcore.errors import DistmonError

    shutil.copytree(finished_run / names.CHECKPOINT_DIR, tmp_path / "full" / names.CHECKPOINT_DIR)
    with pytest.raises(DistmonError, match="does not fit this job"):
        run_job(job(tmp_path, "full", "data.synthetic.num_classes=5"))


def test_each_step_splits_at_the_reduction_and_the_heartbeat_says_so(finished_run: Path) -> None:
    """In-graph timestamps: time to the gradients and the wait in their reduction, per step,
    within the step's wall time; the heartbeat (and run.json's copy) holds the last interval."""
    train = _scalars(finished_run / names.TRAIN_DIR)
    for (step, compute), (_, wait), (_, step_ms) in zip(
            train[names.STEP_COMPUTE_SECONDS], train[names.REDUCE_WAIT_SECONDS],
            train[names.STEP_TIME_MS], strict=True):
        assert compute > 0 and wait >= 0 and compute + wait <= step_ms / 1000.0 * 1.05, step
    beat = json.loads((finished_run / names.heartbeat_name(0)).read_text())
    record = json.loads((finished_run / names.RUN_JSON).read_text())
    assert beat["step"] == record["last_step"] and beat["hung"] is None
    assert record["workers"]["0"]["perf"]["compute_seconds"] > 0
    assert beat["phase"] in ("computing", "reducing") and 0 < beat["reached"] <= beat["step"]
