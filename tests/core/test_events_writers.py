"""Event files written during the test by the real writers, read back exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distcore.events import load_once
from distcore.events.snapshots import RunSnapshot
from tests.core.events_helpers import assert_files_decode_alike, only_run, steps_values


def _f32(value: float) -> float:
    return float(np.float32(value))


def _by_name(root: Path) -> dict[str, RunSnapshot]:
    assert_files_decode_alike(root)  # grouped decoding == per-record, on real writers' files
    return {run.name: run for run in load_once([root])}


def _tensorboard_reference(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """The same directory read by TensorBoard's own EventAccumulator, every scalar kept."""
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util.tensor_util import make_ndarray

    acc = ea.EventAccumulator(str(run_dir), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    acc.Reload()
    out: dict[str, list[tuple[int, float]]] = {}
    for tag in acc.Tags()["tensors"]:
        out[tag] = [(e.step, float(make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]
    for tag in acc.Tags()["scalars"]:
        out[tag] = [(e.step, e.value) for e in acc.Scalars(tag)]
    return out


@pytest.mark.slow
def test_tf_summary_v2_scalars_other_kinds_and_hparams(tf: Any, tmp_path: Path) -> None:
    from tensorboard.plugins.hparams import api as hp

    writer = tf.summary.create_file_writer(str(tmp_path / "tf2"))
    with writer.as_default():
        hp.hparams({"lr": 0.125, "optimizer": "adam", "layers": 3, "bn": True})
        for step in range(25):
            tf.summary.scalar("loss", 1.0 / (step + 1), step=step)
            tf.summary.scalar("nested/acc", step / 25.0, step=step)
            tf.summary.histogram("weights", tf.random.normal([50]), step=step)
            tf.summary.image("img", tf.zeros([1, 4, 4, 1]), step=step)
            tf.summary.text("note", "hello", step=step)
        # A 64-bit integer tensor with the scalars plugin (a custom writer, not tf.summary.scalar).
        meta = tf.compat.v1.SummaryMetadata(
            plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars")
        )
        for step in range(3):
            seen = tf.constant(1000 * step, tf.int64)
            tf.summary.write("examples_seen", seen, step=step, metadata=meta)
    writer.close()
    run = only_run(tmp_path)
    assert run.name == "tf2"
    assert set(run.scalars) == {"loss", "nested/acc", "examples_seen"}
    assert steps_values(run, "loss") == [(s, _f32(1.0 / (s + 1))) for s in range(25)]
    assert steps_values(run, "nested/acc") == [(s, _f32(s / 25.0)) for s in range(25)]
    assert steps_values(run, "examples_seen") == [(0, 0.0), (1, 1000.0), (2, 2000.0)]
    loss = run.scalars["loss"]
    assert (loss.count, loss.last_step, loss.min, loss.max) == (25, 24, _f32(1 / 25), 1.0)
    assert dict(run.hparams) == {"lr": 0.125, "optimizer": "adam", "layers": 3.0, "bn": True}
    assert run.problems == () and run.files == 1


@pytest.mark.slow
def test_keras_tensorboard_callback(tf: Any, tmp_path: Path) -> None:
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    x = np.random.default_rng(0).random((32, 4), dtype=np.float32)
    y = np.arange(32) % 2
    callback = keras.callbacks.TensorBoard(str(tmp_path), update_freq=1, write_graph=False)
    history = model.fit(x, y, batch_size=8, epochs=2, validation_data=(x, y), verbose=0,
                        callbacks=[callback])
    runs = _by_name(tmp_path)
    assert set(runs) == {"train", "validation"}
    train, validation = runs["train"], runs["validation"]
    assert {"epoch_loss", "epoch_accuracy", "batch_loss"} <= set(train.scalars)
    assert train.scalars["batch_loss"].count == 8  # 4 batches x 2 epochs
    assert [v for _, v in steps_values(train, "epoch_loss")] == [
        _f32(v) for v in history.history["loss"]
    ]
    assert [v for _, v in steps_values(validation, "epoch_loss")] == [
        _f32(v) for v in history.history["val_loss"]
    ]
    for run_dir, run in ((tmp_path / "train", train), (tmp_path / "validation", validation)):
        reference = _tensorboard_reference(run_dir)
        assert set(reference) == set(run.scalars)
        for tag, points in reference.items():
            assert steps_values(run, tag) == points, tag


def test_tensorboardx_simple_values_and_hparams(tmp_path: Path) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "tbx"))
    for step in range(0, 300, 3):
        writer.add_scalar("loss", 2.0 - step / 300, step)
        writer.add_scalar("lr", 0.1, step)
    writer.add_histogram("w", np.arange(10.0), 0)
    writer.add_hparams({"lr": 0.1, "batch": 64}, {"hparam/final_loss": 1.5}, name="hp")
    writer.close()
    runs = _by_name(tmp_path)
    tbx = runs["tbx"]
    assert steps_values(tbx, "loss") == [(s, _f32(2.0 - s / 300)) for s in range(0, 300, 3)]
    assert tbx.scalars["lr"].count == 100 and tbx.scalars["lr"].last_value == _f32(0.1)
    assert tbx.problems == ()
    hp = runs["tbx/hp"]
    assert dict(hp.hparams) == {"lr": 0.1, "batch": 64.0}
    assert steps_values(hp, "hparam/final_loss") == [(0, 1.5)]


def test_pytorch_summary_writer(tmp_path: Path) -> None:
    tensorboard = pytest.importorskip("torch.utils.tensorboard",
                                      reason="PyTorch missing (pip install torch runs it)")
    writer = tensorboard.SummaryWriter(str(tmp_path / "torch"))
    for step in range(10):
        writer.add_scalar("loss", 1.0 / (step + 1), step)
    writer.close()
    run = only_run(tmp_path)
    assert steps_values(run, "loss") == [(s, _f32(1.0 / (s + 1))) for s in range(10)]
