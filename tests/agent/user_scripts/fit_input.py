"""A user's own `model.fit` script under MirroredStrategy, watched by the monitor's callback.

Its pipeline's map sleeps 20 ms per element, sequentially; with `--parallel`, the same map
with `num_parallel_calls=AUTOTUNE` and a prefetch. The model's step takes about 200 ms (a
layer that waits 100 ms on each of the two replicas, one after the other, standing for a
heavier model), so that the sequential pipeline (280 ms a batch of 14) keeps the step waiting,
while a parallel one (140 ms or less: two calls at once even on two cores) keeps ahead of it.
"""

from __future__ import annotations

import argparse
import time

import keras
import tensorflow as tf

from distagent import monitor

ELEMENT_SLEEP_S = 0.02
STEP_SLEEP_S = 0.1
BATCH = 14


def sleepy(x: tf.Tensor) -> tf.Tensor:
    tf.py_function(lambda: time.sleep(ELEMENT_SLEEP_S), [], [])
    return x


def _wait_a_step() -> float:
    time.sleep(STEP_SLEEP_S)
    return 0.0


class Slow(keras.layers.Layer):
    def call(self, x: tf.Tensor) -> tf.Tensor:
        done = tf.py_function(_wait_a_step, [], tf.float32)
        done.set_shape(())
        return x + 0.0 * done

    def compute_output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        return input_shape


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("logdir")
    parser.add_argument("--parallel", action="store_true")
    parser.add_argument("--steps", type=int, default=24)
    args = parser.parse_args()
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), Slow(), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
    examples = BATCH * args.steps
    data = tf.data.Dataset.from_tensor_slices(
        (tf.random.normal((examples, 4)), tf.random.normal((examples, 1))))
    parallel = tf.data.AUTOTUNE if args.parallel else None
    data = data.map(lambda x, y: (sleepy(x), y), num_parallel_calls=parallel).batch(BATCH)
    if args.parallel:
        data = data.prefetch(tf.data.AUTOTUNE)
    callback = monitor.KerasCallback(args.logdir, name="fit", log_every=4)
    model.fit(data, epochs=1, callbacks=[callback], verbose=0)


if __name__ == "__main__":
    main()
