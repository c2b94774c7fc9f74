"""The monitor in this process: its refusals before training, a failing loop, SIGTERM, and the
same losses with and without it. Real TensorFlow on CPU, real files, a real signal."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from distcore import names
from distcore.jobs.agent import read_run_json


def record(run_dir: Path) -> dict[str, Any]:
    doc = read_run_json(run_dir)
    assert doc is not None, f"no run.json in {run_dir}"
    return doc


def test_a_logdir_that_is_a_file_is_refused_before_training(tmp_path: Path) -> None:
    from distagent import monitor

    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    with pytest.raises(monitor.MonitorError, match="not a directory"):
        monitor.KerasCallback(a_file)
    with pytest.raises(monitor.MonitorError, match="not a directory"), monitor.run(a_file):
        pytest.fail("the block ran")


def test_a_logdir_it_cannot_write_is_refused_before_training() -> None:
    from distagent import monitor

    # /proc takes no new directory, whoever asks (root included).
    with pytest.raises(monitor.MonitorError, match="cannot write there"):
        monitor.KerasCallback("/proc/distmon-monitor-test")


@pytest.mark.parametrize("options, match", [
    ({"log_evry": 5}, "unknown monitor option 'log_evry'"),
    ({"log_every": 0}, "log_every"),
    ({"hang_seconds": -1}, "hang_seconds"),
])
def test_bad_options_are_refused_by_name(tmp_path: Path, options: dict[str, Any],
                                         match: str) -> None:
    from distagent import monitor

    with pytest.raises(monitor.MonitorError, match=match):
        monitor.KerasCallback(tmp_path, **options)


def _loop(run: Any, tf: Any, steps: int, fail_at: int = -1, signal_at: int = -1) -> None:
    data = tf.data.Dataset.range(1000).map(lambda i: tf.cast(i, tf.float32))
    for step, x in enumerate(run.iterate(data)):
        if step == steps:
            break
        if step == fail_at:
            raise RuntimeError(f"bad batch at {step}")
        if step == signal_at:
            os.kill(os.getpid(), signal.SIGTERM)
        run.step(loss=x * 0.5, extra=1.0)


def test_a_loop_that_ends_is_finished_with_what_a_job_writes(tmp_path: Path, tf: Any) -> None:
    from distagent import monitor

    with monitor.run(tmp_path, name="ok", log_every=4, global_batch_size=1) as run:
        _loop(run, tf, steps=12)
    doc = record(tmp_path / "ok")
    assert doc["status"] == names.STATUS_FINISHED
    assert doc["last_step"] == 12
    assert doc["metrics"][names.STEP_TIME_MS] > 0
    assert names.INPUT_WAIT_FRACTION in doc["metrics"]
    assert doc["ledger"]["compute"] > 0 and doc["goodput"] is not None
    assert doc["workers"]["0"]["step"] == 12
    for part in (names.TRAIN_DIR, names.SYSTEM_DIR):
        assert list((tmp_path / "ok" / part).glob("events.out.tfevents.*")), part
    assert (tmp_path / "ok" / names.heartbeat_name(0)).is_file()


def test_an_exception_in_the_users_loop_ends_the_run_failed(tmp_path: Path, tf: Any) -> None:
    from distagent import monitor

    with pytest.raises(RuntimeError, match="bad batch at 5"), \
            monitor.run(tmp_path, name="bad") as run:
        _loop(run, tf, steps=20, fail_at=5)
    doc = record(tmp_path / "bad")
    assert doc["status"] == names.STATUS_FAILED
    assert doc["error"] == "RuntimeError: bad batch at 5"
    assert doc["last_step"] == 5
    assert "Traceback" in doc["traceback"]


def test_sigterm_ends_the_run_stopped_and_the_script_goes_on(tmp_path: Path, tf: Any) -> None:
    from distagent import monitor

    with monitor.run(tmp_path, name="term") as run:
        _loop(run, tf, steps=50, signal_at=6)
        pytest.fail("the loop went on after SIGTERM")
    doc = record(tmp_path / "term")
    assert doc["status"] == names.STATUS_STOPPED
    assert doc["message"] == "stopped by SIGTERM"
    assert doc["last_step"] == 7
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def _fit_losses(tf: Any, logdir: Path | None) -> list[float]:
    import keras

    from distagent import monitor

    keras.utils.set_random_seed(3)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8),
                                  keras.layers.Dense(1)])
        model.compile(keras.optimizers.SGD(0.05), "mse")
    x = tf.random.stateless_normal((96, 4), seed=(1, 2))
    data = tf.data.Dataset.from_tensor_slices((x, tf.reduce_sum(x, 1, keepdims=True))).batch(8)
    losses: list[float] = []
    callbacks: list[Any] = [keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: losses.append(float(logs["loss"])))]
    if logdir is not None:
        callbacks.append(monitor.KerasCallback(logdir, name="fit", log_every=3))
    model.fit(data, epochs=2, callbacks=callbacks, verbose=0)
    return losses


def test_the_callback_changes_no_loss_and_measures_the_input_wait(tmp_path: Path,
                                                                  tf: Any) -> None:
    without = _fit_losses(tf, None)
    with_it = _fit_losses(tf, tmp_path)
    assert with_it == without
    doc = record(tmp_path / "fit")
    assert doc["status"] == names.STATUS_FINISHED
    assert doc["last_step"] == 24 and doc["total_steps"] == 24
    assert doc["plan"]["global_batch_size"] == 8
    assert names.INPUT_WAIT_MS in doc["metrics"]
    assert doc["ledger"]["input_wait"] > 0
    assert json.loads((tmp_path / "fit" / names.RUN_JSON).read_text())["status"] == "finished"


def test_an_exception_inside_fit_ends_the_run_failed(tmp_path: Path, tf: Any) -> None:
    import keras

    from distagent import monitor

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")

    def broken(x: Any, y: Any) -> Any:
        tf.debugging.assert_less(tf.reduce_max(x), 5.0, message="value out of range")
        return x, y

    xs = tf.range(40, dtype=tf.float32)[:, None] * tf.ones((1, 2))
    data = tf.data.Dataset.from_tensor_slices((xs, xs[:, :1])).map(broken).batch(2)
    callback = monitor.KerasCallback(tmp_path, name="broken")
    with pytest.raises(tf.errors.InvalidArgumentError):
        model.fit(data, epochs=1, callbacks=[callback], verbose=0)
    doc = record(tmp_path / "broken")
    assert doc["status"] == names.STATUS_FAILED
    assert "value out of range" in doc["error"]
