"""The compiled training and evaluation steps, and the counters they keep.

One call of `TrainStep` runs `n` steps inside one `tf.function` (an inner loop like Keras'
`steps_per_execution`, unrolled: n is small and bounded by the log interval). Each replica's loss is
averaged over the GLOBAL batch (`tf.nn.compute_average_loss`), so the optimizer's all-reduce SUM of
gradients yields the gradient of the global mean: the same update as one device on the whole batch.

Input wait is measured inside the graph, where Python dispatch cannot pollute it:

    t0 = timestamp()            # after the previous step's weight updates have landed
    batch = iterator.get_next() # waits for the next batch on every replica's device
    t1 = timestamp()            # after every replica's component of the batch exists

`t1 - t0` is the time the step stood still for its input: waiting for the host pipeline and for
the copy to the replicas' devices when the multi-device prefetch had not already done it. Control
dependencies pin the order (t0 after the previous update, get_next after t0, t1 after the batch's
tensors), so the pair can neither read 0 for a batch that is not there nor swallow compute time.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf

# Counters summed across replicas inside the step; the host reads them once per log interval.
# One vector variable per group: one all-reduce and one update per step, whatever the count.
INTERVAL = ("loss_sum", "correct", "examples", "wait_seconds")
EPOCH = ("loss_sum", "correct", "examples")


@dataclass
class Counters:
    names: tuple[str, ...]
    variable: tf.Variable

    @classmethod
    def zeros(cls, names: tuple[str, ...], label: str) -> Counters:
        return cls(names, tf.Variable(tf.zeros([len(names)], tf.float64), trainable=False,
                                      name=label))


@dataclass
class TrainState:
    """Plain (non-distributed) host variables; `step` and `epoch` are checkpointed."""

    step: tf.Variable
    first_bad_step: tf.Variable
    interval: Counters
    epoch: Counters

    @classmethod
    def create(cls) -> TrainState:
        with tf.device("/cpu:0"):
            return cls(
                step=tf.Variable(0, dtype=tf.int64, trainable=False, name="step"),
                first_bad_step=tf.Variable(-1, dtype=tf.int64, trainable=False, name="bad"),
                interval=Counters.zeros(INTERVAL, "interval"),
                epoch=Counters.zeros(EPOCH, "epoch"),
            )

    def read(self, counters: Counters) -> dict[str, float]:
        values = counters.variable.numpy()
        return {name: float(v) for name, v in zip(counters.names, values, strict=True)}

    def reset(self, counters: Counters) -> None:
        counters.variable.assign(tf.zeros_like(counters.variable))

    def checkpointables(self) -> dict[str, Any]:
        return {"step": self.step, "epoch_sums": self.epoch.variable}


def _flat_local_tensors(strategy: tf.distribute.Strategy, batch: Any) -> list[tf.Tensor]:
    return [
        t for part in tf.nest.flatten(batch) for t in strategy.experimental_local_results(part)
    ]


def _batch_stats(labels: Any, logits: Any, per_example: Any) -> Any:
    """[loss sum, correct predictions, examples] of one replica's batch, as one float64 vector."""
    labels = tf.reshape(tf.cast(labels, tf.int64), [-1])
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int64)
    correct = tf.reduce_sum(tf.cast(tf.equal(predicted, labels), tf.float64))
    examples = tf.cast(tf.size(labels), tf.float64)
    return tf.stack([tf.reduce_sum(tf.cast(per_example, tf.float64)), correct, examples])


class TrainStep:
    """`step(iterator, n)` trains n steps; counters accumulate in `state`."""

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        model: keras.Model,
        optimizer: keras.optimizers.Optimizer,
        state: TrainState,
        *,
        global_batch_size: int,
        jit_compile: bool = False,
    ) -> None:
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.state = state
        self.global_batch_size = global_batch_size
        self._loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
        # XLA compiles the maths only: the optimizer's cross-replica merge cannot live inside it.
        # Without XLA the maths is not nested in a tf.function of its own: a nested function
        # cannot hold a cross-replica call, and synchronized BatchNorm makes one.
        self._gradients = (tf.function(self._forward_backward, jit_compile=True) if jit_compile
                           else self._forward_backward)
        self._steps = tf.function(self._run_steps)

    def __call__(self, iterator: Any, n: int) -> None:
        self._steps(iterator, n)

    def tracing_count(self) -> int:
        return int(self._steps.experimental_get_tracing_count())

    def _forward_backward(self, features: Any, labels: Any) -> tuple[Any, ...]:
        with tf.GradientTape() as tape:
            logits = self.model(features, training=True)
            per_example = self._loss(labels, logits)
            loss = tf.nn.compute_average_loss(
                per_example, global_batch_size=self.global_batch_size
            )
            if self.model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(self.model.losses))
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, self.model.trainable_variables)
        return grads, _batch_stats(labels, logits, per_example)

    def _replica_step(self, features: Any, labels: Any, t1: Any) -> tuple[Any, ...]:
        # The step's maths waits for t1: on a busy thread pool, t1 would otherwise queue behind
        # the first kernels of the step and count their time as input wait.
        with tf.control_dependencies([t1]):
            features = tf.nest.map_structure(tf.identity, features)
        grads, stats = self._gradients(features, labels)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables, strict=True))
        # A marker after reads of the updated weights: the next step's t0 waits on it, so the
        # clock starts only once this step's updates have landed.
        with tf.control_dependencies([tf.identity(v) for v in self.model.trainable_variables]):
            landed = tf.constant(0.0)
        return stats, landed

    def _run_steps(self, iterator: Any, n: int) -> None:
        strategy, state = self.strategy, self.state
        landed: list[Any] = []
        for _ in range(n):
            with tf.control_dependencies(landed):
                t0 = tf.timestamp()
            with tf.control_dependencies([t0]):
                features, labels = iterator.get_next()
            with tf.control_dependencies(_flat_local_tensors(strategy, (features, labels))):
                t1 = tf.timestamp()
            stats, marker = strategy.run(self._replica_step, args=(features, labels, t1))
            stats = strategy.reduce(tf.distribute.ReduceOp.SUM, stats, axis=None)
            landed = list(strategy.experimental_local_results(marker))
            step = state.step.assign_add(1)
            self._count(stats, t1 - t0, step)

    def _count(self, stats: Any, wait: Any, step: Any) -> None:
        state = self.state
        state.interval.variable.assign_add(tf.concat([stats, [wait]], axis=0))
        state.epoch.variable.assign_add(stats)
        bad = tf.logical_and(tf.logical_not(tf.math.is_finite(stats[0])),
                             state.first_bad_step < 0)
        state.first_bad_step.assign(tf.where(bad, step, state.first_bad_step))


class EvalStep:
    """`evaluate(dist_dataset)` -> (loss_sum, correct, examples) over one pass, replicas summed."""

    def __init__(self, strategy: tf.distribute.Strategy, model: keras.Model) -> None:
        self.strategy = strategy
        self.model = model
        self._loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
        self._evaluate = tf.function(self._run)

    def __call__(self, dist_dataset: Any) -> tuple[float, float, float]:
        with warnings.catch_warnings():
            # Iterating a distributed dataset in a tf.function reads its options in graph mode,
            # which TensorFlow warns about; the options are set on the dataset and do not change.
            warnings.filterwarnings("ignore", message="To make it possible to preserve tf.data")
            totals = self._evaluate(dist_dataset)
        return float(totals[0]), float(totals[1]), float(totals[2])

    def _replica(self, features: Any, labels: Any) -> Any:
        logits = self.model(features, training=False)
        return _batch_stats(labels, logits, self._loss(labels, logits))

    def _run(self, dist_dataset: Any) -> Any:
        totals = tf.zeros([3], tf.float64)
        for features, labels in dist_dataset:
            stats = self.strategy.run(self._replica, args=(features, labels))
            totals += self.strategy.reduce(tf.distribute.ReduceOp.SUM, stats, axis=None)
        return totals
