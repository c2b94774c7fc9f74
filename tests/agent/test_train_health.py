"""The step's gradient health on real CPU replicas: perf/grad_norm is the global norm of the
whole batch's gradient (the same on two replicas as on one device) before clipping, and
optimizer.clip_norm clips the update to it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.slow

BATCH = 32


def one_step(tf: Any, strategy: Any, clip_norm: float) -> tuple[float, list[np.ndarray],
                                                                  list[np.ndarray]]:
    import keras

    from distagent.models import build_model
    from distagent.train.steps import Health, TrainState, TrainStep

    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH, 8)).astype("float32")
    y = rng.integers(0, 4, size=BATCH)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH, drop_remainder=True)
    keras.utils.set_random_seed(1)
    with strategy.scope():
        model = build_model("mlp", (8,), 4)
        optimizer = keras.optimizers.SGD(1.0)
    before = [np.array(w) for w in model.get_weights()]
    state = TrainState.create()
    step = TrainStep(strategy, model, optimizer, state, global_batch_size=BATCH,
                     health=Health(clip_norm=clip_norm))
    step(iter(strategy.experimental_distribute_dataset(data)), 1, keep_gradients=True)
    assert step.kept_gradients is not None
    grads = [np.array(g.numpy()) for g in step.kept_gradients]
    delta = [a - b for a, b in zip(model.get_weights(), before, strict=True)]
    return float(state.grad_norm.numpy()), grads, delta


def global_norm(arrays: list[np.ndarray]) -> float:
    return float(np.sqrt(sum(float(np.sum(a.astype(np.float64) ** 2)) for a in arrays)))


def test_grad_norm_is_the_whole_batch_s_and_clipping_bounds_the_update(
    tf: Any, cpu_devices: list[str]
) -> None:
    one = tf.distribute.OneDeviceStrategy(cpu_devices[0])
    two = tf.distribute.MirroredStrategy(
        cpu_devices[:2], cross_device_ops=tf.distribute.ReductionToOneDevice())
    norm_one, grads_one, delta_one = one_step(tf, one, 0.0)
    norm_two, grads_two, delta_two = one_step(tf, two, 0.0)
    assert norm_one > 0 and norm_two == pytest.approx(norm_one, rel=1e-5)
    assert global_norm(grads_one) == pytest.approx(norm_one, rel=1e-5)
    for a, b in zip(grads_two, grads_one, strict=True):  # the kept gradient: all-reduced, once
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    for a, b in zip(delta_two, delta_one, strict=True):  # not summed twice by the optimizer
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert global_norm(delta_one) == pytest.approx(norm_one, rel=1e-4)  # SGD(1): Δw = -g
    limit = norm_one / 4
    norm_clipped, _, delta_clipped = one_step(tf, two, limit)
    assert norm_clipped == pytest.approx(norm_one, rel=1e-5)  # the norm before clipping
    assert global_norm(delta_clipped) == pytest.approx(limit, rel=1e-4)
    for a, b in zip(delta_clipped, delta_one, strict=True):  # the same direction, scaled
        np.testing.assert_allclose(a, b / 4, rtol=1e-3, atol=1e-6)


def test_a_job_s_histograms_read_the_same_in_distmon_as_in_tensorboard(
    tf: Any, tmp_path: Any
) -> None:
    from distagent.config import config_from_dict
    from distagent.train import run_job
    from distcore import names
    from tests.core.test_histograms import assert_same, ours

    raw = {
        "run": {"name": "h", "logdir": str(tmp_path), "seed": 3},
        "strategy": {"kind": "mirrored", "cpu_replicas": 2},
        "data": {"source": "synthetic", "per_replica_batch_size": 16, "validation_fraction": 0.0,
                 "synthetic": {"num_examples": 320, "num_classes": 4, "input_shape": [8]}},
        "model": {"name": "mlp", "hidden_units": [16]},
        "train": {"epochs": 1, "steps_per_epoch": 6, "log_every_steps": 2,
                  "histogram_every_steps": 3},
    }
    assert run_job(config_from_dict(raw)) == names.STATUS_FINISHED
    train = tmp_path / "h" / names.TRAIN_DIR
    assert_same(train, within_bucket=True)
    mine = ours(train)
    # Both layers' kernel and bias (Keras numbers layer names per process: dense, dense_1, ...).
    variables = {t.removeprefix("weights/") for t in mine if t.startswith("weights/")}
    assert len(variables) == 4 and {v.rsplit("/", 1)[1] for v in variables} == {"kernel", "bias"}
    assert set(mine) == {f"{kind}/{v}" for kind in ("weights", "gradients") for v in variables}
    assert all(set(steps) == {3, 6} for steps in mine.values())
