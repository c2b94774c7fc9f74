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
A step built with `timed=False` (benchmarks only, distagent.train.bare) has none of these: its
timers read NaN, which no log point writes.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf

from distagent.objective import Objective, resolve_objective

# Counters summed across replicas inside the step; the host reads them once per log interval.
# One vector variable per group: one all-reduce and one update per step, whatever the count.
# The objective's sums come first (loss, its metrics, examples: objective.py), then the timers.
TIMERS = ("wait_seconds", "compute_seconds", "reduce_seconds")
CLASSIFIER_COUNTERS = ("loss_sum", "metric:accuracy", "examples")


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
    """Plain (non-distributed) host variables; `step`, `epoch`, the learning-rate scale and the
    data skip are checkpointed (a resumed run keeps the rate and data position recoveries set).
    `first_bad_step` / `bad_loss`: the first step whose loss (or gradient) diverged, and its loss.
    `grad_norm`: the global L2 norm of the last step's all-reduced gradient, before clipping.
    `reached`: the step whose gradients this worker holds, set before their reduction, and
    `reduced`: the step whose reduction ended (`step` itself may count on before it: nothing
    orders its increment after the collective). phases.py reads both while a step runs.
    `loss_bound`: a step's mean loss above it diverges (infinite: none yet); set by the loop,
    never checkpointed (every worker sets it from the same all-reduced loss)."""

    step: tf.Variable
    first_bad_step: tf.Variable
    bad_loss: tf.Variable
    grad_norm: tf.Variable
    lr_scale: tf.Variable
    data_skip: tf.Variable
    reached: tf.Variable
    reduced: tf.Variable
    loss_bound: tf.Variable
    interval: Counters
    epoch: Counters

    @classmethod
    def create(cls, sums: tuple[str, ...] = CLASSIFIER_COUNTERS) -> TrainState:
        """`sums`: the objective's counters (Objective.counter_names)."""
        with tf.device("/cpu:0"):
            return cls(
                step=tf.Variable(0, dtype=tf.int64, trainable=False, name="step"),
                first_bad_step=tf.Variable(-1, dtype=tf.int64, trainable=False, name="bad"),
                bad_loss=tf.Variable(0.0, dtype=tf.float64, trainable=False, name="bad_loss"),
                grad_norm=tf.Variable(0.0, dtype=tf.float32, trainable=False, name="grad_norm"),
                lr_scale=tf.Variable(1.0, dtype=tf.float32, trainable=False, name="lr_scale"),
                data_skip=tf.Variable(0, dtype=tf.int64, trainable=False, name="data_skip"),
                reached=tf.Variable(0, dtype=tf.int64, trainable=False, name="reached"),
                reduced=tf.Variable(0, dtype=tf.int64, trainable=False, name="reduced"),
                loss_bound=tf.Variable(math.inf, dtype=tf.float64, trainable=False,
                                       name="loss_bound"),
                interval=Counters.zeros((*sums, *TIMERS), "interval"),
                epoch=Counters.zeros(sums, "epoch"),
            )

    def read(self, counters: Counters) -> dict[str, float]:
        values = counters.variable.numpy()
        return {name: float(v) for name, v in zip(counters.names, values, strict=True)}

    def reset(self, counters: Counters) -> None:
        counters.variable.assign(tf.zeros_like(counters.variable))

    def clear_divergence(self) -> None:
        self.first_bad_step.assign(-1)
        self.reset(self.interval)

    def checkpointables(self) -> dict[str, Any]:
        return {"step": self.step, "epoch_sums": self.epoch.variable,
                "lr_scale": self.lr_scale, "data_skip": self.data_skip}


@dataclass(frozen=True)
class Health:
    """What the step checks and does to its gradient (see TrainStep)."""

    clip_norm: float = 0.0
    non_finite_gradient_diverges: bool = True
    """False under a dynamic loss scale: an overflowing gradient is skipped, not a divergence."""
    grad_norm: bool = True
    """False: the step as it was before gradient health (the optimizer all-reduces, no norm,
    no clipping): the anchor bench/train.py measures the norm's cost against."""


def _flat_local_tensors(strategy: tf.distribute.Strategy, batch: Any) -> list[tf.Tensor]:
    return [
        t for part in tf.nest.flatten(batch) for t in strategy.experimental_local_results(part)
    ]


def split_batch(batch: Any) -> tuple[Any, Any, Any]:
    """(features, labels, sample_weights or None) of a (features, labels[, weights]) element."""
    if len(batch) == 3:
        return batch[0], batch[1], batch[2]
    return batch[0], batch[1], None


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
        health: Health | None = None,
        objective: Objective | None = None,
        timed: bool = True,
    ) -> None:
        self.strategy = strategy
        self.timed = timed
        self.model = model
        self.optimizer = optimizer
        self.state = state
        self.global_batch_size = global_batch_size
        self.health = health or Health()
        self.kept_gradients: list[tf.Variable] | None = None
        if self.health.grad_norm:
            _aggregate_gradients_here(optimizer)
        self.objective = objective or resolve_objective("", (), model)
        # XLA compiles the maths only: the optimizer's cross-replica merge cannot live inside it.
        # Without XLA the maths is not nested in a tf.function of its own: a nested function
        # cannot hold a cross-replica call, and synchronized BatchNorm makes one.
        self._gradients = (tf.function(self._forward_backward, jit_compile=True) if jit_compile
                           else self._forward_backward)
        self._steps = tf.function(self._run_steps)

    def __call__(self, iterator: Any, n: int, keep_gradients: bool = False) -> None:
        """Run n steps; `keep_gradients`: copy the last step's gradient into `kept_gradients`
        (for histograms; a separate trace, so other calls pay nothing)."""
        if keep_gradients and self.kept_gradients is None:
            with tf.device("/cpu:0"):
                self.kept_gradients = [
                    tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False,
                                name=f"grad_{i}")
                    for i, v in enumerate(self.model.trainable_variables)]
        self._steps(iterator, n, keep_gradients)

    def tracing_count(self) -> int:
        return int(self._steps.experimental_get_tracing_count())

    def _forward_backward(self, features: Any, labels: Any, weights: Any) -> tuple[Any, ...]:
        objective = self.objective
        with tf.GradientTape() as tape:
            preds = self.model(features, training=True)
            per_example = objective.per_example_loss(labels, preds, weights)
            loss = tf.nn.compute_average_loss(
                per_example, global_batch_size=self.global_batch_size
            )
            if self.model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(self.model.losses))
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, self.model.trainable_variables)
        return grads, objective.stats(labels, preds, weights, per_example)

    def _replica_step(self, features: Any, labels: Any, weights: Any,
                      t1: Any) -> tuple[Any, ...]:
        # The step's maths waits for t1: on a busy thread pool, t1 would otherwise queue behind
        # the first kernels of the step and count their time as input wait.
        if self.timed:
            with tf.control_dependencies([t1]):
                features = tf.nest.map_structure(tf.identity, features)
        grads, stats = self._gradients(features, labels, weights)
        # This worker's gradients exist: the time to them, apart from the reduction's wait.
        ready = self._stamp([g for g in grads if g is not None])
        if self.health.grad_norm:
            grads, norm = self._reduce_and_clip(list(grads))
            reduced = self._stamp([g for g in grads if g is not None])
        else:  # NaN: never written (only finite values are), never a divergence
            norm = tf.constant(float("nan"))
            # The optimizer reduces: its wait is not told apart, so it is unknown (NaN, never
            # written), not a made-up zero.
            reduced = ready + float("nan")
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables, strict=True))
        # A marker after reads of the updated weights: the next step's t0 waits on it, so the
        # clock starts only once this step's updates have landed.
        with tf.control_dependencies([tf.identity(v) for v in self.model.trainable_variables]):
            landed = tf.constant(0.0)
        return stats, landed, norm, grads, (ready, reduced)

    def _reduce_and_clip(self, grads: list[Any]) -> tuple[list[Any], Any]:
        """All-reduce the gradient here (one all-reduce, as the optimizer would), so its global
        norm is the whole batch's and clipping sees it: Keras 3 clips each replica's part
        before its own all-reduce, which is not the global norm. The norm is of the unscaled
        gradient (a dynamic loss scale multiplies it)."""
        present = [i for i, g in enumerate(grads) if g is not None]
        reduced = tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, [grads[i] for i in present])
        for i, g in zip(present, reduced, strict=True):
            grads[i] = g
        scale = getattr(self.optimizer, "dynamic_scale", None)
        scale = tf.cast(scale, tf.float32) if scale is not None else tf.constant(1.0)
        norm = tf.linalg.global_norm([tf.cast(g, tf.float32) for g in reduced]) / scale
        if self.health.clip_norm > 0:
            clipped, _ = tf.clip_by_global_norm(
                [grads[i] for i in present], self.health.clip_norm * scale, use_norm=norm * scale)
            for i, g in zip(present, clipped, strict=True):
                grads[i] = g
        return grads, norm

    def _run_steps(self, iterator: Any, n: int, keep_gradients: bool) -> None:
        strategy, state = self.strategy, self.state
        landed: list[Any] = []
        first = state.step.read_value()
        for index in range(n):
            t0 = self._stamp(landed)
            with tf.control_dependencies([t0] if self.timed else []):
                batch = iterator.get_next()
            t1 = self._stamp(_flat_local_tensors(strategy, batch))
            stats, marker, norm, grads, (ready, reduced) = strategy.run(
                self._replica_step, args=(*split_batch(batch), t1))
            ready = tf.reduce_max(tf.stack(strategy.experimental_local_results(ready)))
            reduced = tf.reduce_max(tf.stack(strategy.experimental_local_results(reduced)))
            with tf.control_dependencies([ready]):  # before the reduction ends, not after
                state.reached.assign(first + index + 1)
            with tf.control_dependencies([reduced]):
                state.reduced.assign(first + index + 1)
            stats = strategy.reduce(tf.distribute.ReduceOp.SUM, stats, axis=None)
            landed = list(strategy.experimental_local_results(marker))
            # Every replica holds the same all-reduced norm: the first's needs no collective.
            norm = strategy.experimental_local_results(norm)[0]
            step = state.step.assign_add(1)
            self._count(stats, tf.stack([t1 - t0, ready - t0, reduced - ready]), step, norm)
            if keep_gradients and index == n - 1 and self.kept_gradients is not None:
                for kept, grad in zip(self.kept_gradients, grads, strict=True):
                    if grad is not None:
                        kept.assign(strategy.experimental_local_results(grad)[0])

    def _stamp(self, after: list[Any]) -> Any:
        """The time once `after` exists; NaN in a step that is not timed."""
        if not self.timed:
            return tf.constant(math.nan, tf.float64)
        with tf.control_dependencies(after):
            return tf.timestamp()

    def _count(self, stats: Any, times: Any, step: Any, norm: Any) -> None:
        """`times`: this worker's [input wait, time to gradients, wait in the reduction]."""
        state, health = self.state, self.health
        state.interval.variable.assign_add(tf.concat([stats, times], axis=0))
        state.epoch.variable.assign_add(stats)
        state.grad_norm.assign(norm)
        # `stats` is all-reduced: every worker sees the same loss and decides the same.
        mean_loss = stats[0] / tf.maximum(stats[-1], 1.0)
        diverged = tf.logical_not(tf.math.is_finite(stats[0]))
        diverged = tf.logical_or(diverged, mean_loss > state.loss_bound)  # inf: no bound yet
        if health.non_finite_gradient_diverges and health.grad_norm:
            diverged = tf.logical_or(diverged, tf.logical_not(tf.math.is_finite(norm)))
        first = tf.logical_and(diverged, state.first_bad_step < 0)
        state.first_bad_step.assign(tf.where(first, step, state.first_bad_step))
        state.bad_loss.assign(tf.where(first, mean_loss, state.bad_loss))


def _aggregate_gradients_here(optimizer: Any) -> None:
    """TrainStep all-reduces the gradient itself (for its global norm): the optimizer must not
    sum it again. Keras 3's TensorFlow optimizer all-reduces in `_all_reduce_sum_gradients`
    (no public switch); a LossScaleOptimizer delegates to its inner optimizer."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    inner._all_reduce_sum_gradients = lambda grads_and_vars: list(grads_and_vars)


class EvalStep:
    """`evaluate(dist_dataset)` -> the objective's sums over one pass, replicas summed."""

    def __init__(self, strategy: tf.distribute.Strategy, model: keras.Model,
                 objective: Objective | None = None) -> None:
        self.strategy = strategy
        self.model = model
        self.objective = objective or resolve_objective("", (), model)
        self._evaluate = tf.function(self._run)

    def __call__(self, dist_dataset: Any) -> dict[str, float]:
        with warnings.catch_warnings():
            # Iterating a distributed dataset in a tf.function reads its options in graph mode,
            # which TensorFlow warns about; the options are set on the dataset and do not change.
            warnings.filterwarnings("ignore", message="To make it possible to preserve tf.data")
            totals = self._evaluate(dist_dataset).numpy()
        return {name: float(v) for name, v in
                zip(self.objective.counter_names(), totals, strict=True)}

    def _replica(self, features: Any, labels: Any, weights: Any) -> Any:
        preds = self.model(features, training=False)
        per_example = self.objective.per_example_loss(labels, preds, weights)
        return self.objective.stats(labels, preds, weights, per_example)

    def _run(self, dist_dataset: Any) -> Any:
        totals = tf.zeros([len(self.objective.counter_names())], tf.float64)
        for batch in dist_dataset:
            stats = self.strategy.run(self._replica, args=split_batch(batch))
            totals += self.strategy.reduce(tf.distribute.ReduceOp.SUM, stats, axis=None)
        return totals
