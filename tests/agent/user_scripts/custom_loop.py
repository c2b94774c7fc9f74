"""A user's own custom training loop, watched by `monitor.run`.

One process under MirroredStrategy (two CPU devices), or with TF_CONFIG set, one worker of a
MultiWorkerMirroredStrategy. The step computes its gradients, marks the reduction
(`run.phase("reduce")`), all-reduces and applies them. `--sleep-ms` slows this process's every
step (a throttled worker); `--block-at N` blocks in the user's own code at step N until the
file `--release` names exists (a worker stuck in its own code).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import keras
import tensorflow as tf

from distagent import monitor


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("logdir")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--sleep-ms", type=float, default=0.0)
    parser.add_argument("--block-at", type=int, default=-1)
    parser.add_argument("--release", default="")
    parser.add_argument("--hang-seconds", default="auto")
    parser.add_argument("--log-every", type=int, default=5)
    args = parser.parse_args()
    if "TF_CONFIG" in os.environ:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    else:
        cpus = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    keras.utils.set_random_seed(7)
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16),
                                  keras.layers.Dense(1)])
    data = tf.data.Dataset.from_tensor_slices(
        (tf.random.normal((64, 8), seed=1), tf.random.normal((64, 1), seed=2))).batch(16).repeat()
    dist = strategy.experimental_distribute_dataset(data)

    @tf.function
    def gradients(batch: tuple[tf.Tensor, tf.Tensor]) -> tuple[object, object]:
        def one(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(x) - y) ** 2)
            return loss, tape.gradient(loss, model.trainable_variables)
        return strategy.run(one, args=batch)

    @tf.function
    def apply(grads: object) -> None:
        def one(g: list[tf.Tensor]) -> None:  # plain SGD on the all-reduced gradients
            # On the replica's device: an argument's tensors have none, which all_reduce needs.
            g = tf.distribute.get_replica_context().all_reduce(
                "MEAN", [tf.identity(x) for x in g])
            for gradient, variable in zip(g, model.trainable_variables, strict=True):
                variable.assign_sub(0.01 * gradient)
        strategy.run(one, args=(grads,))

    hang = args.hang_seconds if args.hang_seconds == "auto" else float(args.hang_seconds)
    with monitor.run(args.logdir, name="loop", strategy=strategy, global_batch_size=16,
                     total_steps=args.steps, log_every=args.log_every,
                     hang_seconds=hang) as run:
        for step, batch in enumerate(run.iterate(dist)):
            if step >= args.steps:
                break
            if step == args.block_at:
                while not Path(args.release).exists():
                    time.sleep(0.05)
            time.sleep(args.sleep_ms / 1000.0)
            loss, grads = gradients(batch)
            run.phase("reduce")
            apply(grads)
            run.step(loss=strategy.reduce("MEAN", loss, axis=None))
    print("finished", flush=True)


if __name__ == "__main__":
    main()
