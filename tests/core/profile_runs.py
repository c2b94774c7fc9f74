"""Real profiles written by TensorFlow on the CPU, for the profile reader's tests.

Run as `python -m tests.core.profile_runs OUT_DIR SCENARIO...` from the repository root: each
scenario writes a TensorBoard run under OUT_DIR/SCENARIO whose `plugins/profile/<ts>/` holds
the `*.xplane.pb` TensorFlow wrote. A subprocess, so that the profiler's process-wide session
and the threads it starts stay out of the test process.

- `keras_slow`: Keras `model.fit` with `TensorBoard(profile_batch=(3, 6))`, whose dataset map
  sleeps in a `tf.py_function` per element, with no parallelism: input-bound.
- `mirrored_slow`: a custom loop under MirroredStrategy over two logical CPUs, profiled with
  `tf.profiler.experimental.start/stop` and steps marked by `Trace(step_num=..., _r=1)`; the same
  sleeping map, sequential.
- `mirrored_fast`: the same loop with the map at `num_parallel_calls=AUTOTUNE`, a short sleep,
  `prefetch`, and a step with more compute than the input takes: not input-bound.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import configure_tensorflow

SLEEP_S = 0.02
BATCH = 4


def _sleeping_map(tf: Any, seconds: float) -> Any:
    def slow(x: Any) -> Any:
        time.sleep(seconds)
        return x

    def mapped(x: Any) -> Any:
        y = tf.py_function(slow, [x], tf.float32)
        y.set_shape([8])
        return y

    return mapped


def _features(tf: Any, count: int) -> Any:
    return tf.data.Dataset.from_tensor_slices(tf.random.uniform([count, 8]))


def keras_slow(tf: Any, out: Path) -> None:
    data = _features(tf, 10 * BATCH).map(_sleeping_map(tf, SLEEP_S)).batch(BATCH)
    data = data.map(lambda x: (x, tf.reduce_sum(x, axis=1, keepdims=True)))
    model = tf.keras.Sequential([tf.keras.Input([8]), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    board = tf.keras.callbacks.TensorBoard(log_dir=str(out), profile_batch=(3, 6))
    model.fit(data, epochs=1, callbacks=[board], verbose=0)


def _mirrored(tf: Any, out: Path, fast: bool) -> None:
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    if fast:
        data = _features(tf, 12 * BATCH).map(
            _sleeping_map(tf, SLEEP_S / 10), num_parallel_calls=tf.data.AUTOTUNE
        ).batch(BATCH).prefetch(tf.data.AUTOTUNE)
    else:
        data = _features(tf, 12 * BATCH).map(_sleeping_map(tf, SLEEP_S)).batch(BATCH)
    with strategy.scope():
        weights = tf.Variable(tf.random.uniform([8, 256]))
        square = tf.Variable(tf.random.uniform([256, 256]))

    @tf.function
    def step(batch: Any) -> Any:
        def replica(x: Any) -> Any:
            with tf.GradientTape() as tape:
                h = tf.tanh(tf.matmul(tf.matmul(x, weights), square))
                loss = tf.reduce_mean(h)
                m = square
                for _ in range(32 if fast else 0):  # compute that outweighs the input
                    m = tf.tanh(tf.matmul(m, square))
                    loss += tf.reduce_mean(m)
            grads = tape.gradient(loss, [weights, square])
            ctx = tf.distribute.get_replica_context()
            grads = ctx.all_reduce("sum", grads)
            weights.assign_sub(0.01 * grads[0])
            square.assign_sub(0.001 * grads[1])
            return loss

        return strategy.run(replica, args=(batch,))

    batches = iter(strategy.experimental_distribute_dataset(data))
    step(next(batches))  # traced outside the profile
    tf.profiler.experimental.start(str(out))
    for number in range(1, 9):
        with tf.profiler.experimental.Trace("train", step_num=number, _r=1):
            step(next(batches))
    tf.profiler.experimental.stop()


SCENARIOS = {
    "keras_slow": keras_slow,
    "mirrored_slow": lambda tf, out: _mirrored(tf, out, fast=False),
    "mirrored_fast": lambda tf, out: _mirrored(tf, out, fast=True),
}


def main(argv: list[str]) -> None:
    tf = configure_tensorflow()
    out = Path(argv[0])
    for name in argv[1:]:
        SCENARIOS[name](tf, out / name)


if __name__ == "__main__":
    main(sys.argv[1:])
