"""Simulated costs: CPU time spent in TensorFlow ops, and storage latency as a C++ sleep.

The CPU cost is a chain of sorts of a small vector, derived from the example. Sorting one row is
single-threaded in TensorFlow, so each example keeps one core busy for the cost, and N parallel
calls can use N cores, as real per-example decoding and augmentation do. What was ruled out:
- a Python busy loop (numpy_function) holds the GIL, so parallel calls cannot overlap it;
- a large matmul is already spread over every core by TensorFlow's intra-op thread pool, so the
  sequential map already uses both cores of a 2-core machine and a parallel map has nothing left
  to gain (the 1.0x a first probe measured); the optimized pipeline sets
  `threading.max_intra_op_parallelism = 1` so that parallel calls, not intra-op threads, own the
  cores, but no setting makes 2 cores do more than 2 cores' work;
- a `tf.while_loop` of tiny ops is dominated by the executor's per-iteration hand-offs between
  threads, which costs wall time without CPU work: parallel calls then "win" by more than the
  core count, which measures the executor, not the cores.
"""

from __future__ import annotations

import functools
import time
from typing import Any

SORT_SIZE = 4096
"""Floats per sort; about 0.1-0.2 ms of one core on a current x86 CPU."""


def _sorts(tf: Any, seed: Any, size: int, repeats: int) -> Any:
    values = tf.math.sin(tf.range(size, dtype=tf.float32) * (seed + 1.0))
    for _ in range(repeats):  # each sort depends on the previous one: no overlap, no pruning
        values = tf.sort(values)[::-1] * 0.999 + 0.0001
    return values


@functools.lru_cache(maxsize=1)
def sort_ms() -> float:
    """CPU milliseconds of one sort of SORT_SIZE floats inside a tf.data map (best of 4)."""
    import tensorflow as tf

    elements, repeats = 16, 8
    ds = tf.data.Dataset.range(elements).map(
        lambda i: _sorts(tf, tf.cast(i, tf.float32), SORT_SIZE, repeats)
    )
    best = float("inf")
    for _ in range(4):
        start = time.process_time()
        for _ in ds:
            pass
        best = min(best, (time.process_time() - start) / (elements * repeats))
    return max(best * 1000.0, 1e-3)


def sort_plan(cost_ms: float, one_sort_ms: float) -> tuple[int, int]:
    """(size, repeats) of the sorts that cost about `cost_ms`; smaller sorts for small costs."""
    if cost_ms >= one_sort_ms:
        return SORT_SIZE, max(1, round(cost_ms / one_sort_ms))
    return max(16, round(SORT_SIZE * cost_ms / one_sort_ms)), 1


def spend_cpu(tf: Any, features: Any, cost_ms: float) -> Any:
    """`features`, returned only after about `cost_ms` of CPU work (inside a tf.data map)."""
    with tf.init_scope():  # calibrate eagerly, outside the dataset function being traced
        size, repeats = sort_plan(cost_ms, sort_ms())
    seed = tf.reshape(tf.cast(features, tf.float32), [-1])[0]
    work = _sorts(tf, seed, size, repeats)
    # The result must feed the output, or the optimizer prunes the work (control dependencies
    # are not enough); 1e-30 × O(1) leaves float32 features unchanged bit for bit.
    return features + tf.cast(tf.reduce_mean(work) * 1e-30, features.dtype)


LATENCY_PARALLELISM = 32
"""Reads in flight against a slow store: waiting costs no CPU, so this is not bounded by cores
(tf.data's autotuner would stop at the core count)."""

_ENDLESS = 2**62
"""Length of the storage clock: longer than any source (zip stops at the read's end)."""


def with_latency(tf: Any, read: Any, latency_ms: float, parallel: Any) -> Any:
    """`read`, each element handed out only after a storage wait of `latency_ms`.

    The waits are a clock dataset zipped with the read: tf.data's SleepDataset, a C++ sleep
    that costs no CPU and never takes the GIL. Sequential (`parallel` == 1), each element
    waits in turn, as a naive reader does. Parallel: LATENCY_PARALLELISM lanes wait at once
    (lane i serves elements i, i+N, ...), interleaved back in order, as many reads in flight
    hide a remote store's latency. Why not a sleep in a `py_function` map: a Python call in
    flight deadlocks the iterator's teardown (it holds the GIL while it waits for the call),
    so a stopped job hung until it was killed."""
    wait_us = max(1, round(latency_ms * 1000.0))
    if parallel == 1:
        clock = _sleeping(tf, tf.data.Dataset.range(_ENDLESS), wait_us)
    else:
        lanes = LATENCY_PARALLELISM
        clock = tf.data.Dataset.range(lanes).interleave(
            lambda lane: _sleeping(tf, tf.data.Dataset.range(lane, _ENDLESS, lanes), wait_us),
            cycle_length=lanes, block_length=1, num_parallel_calls=lanes, deterministic=True)
    return tf.data.Dataset.zip((read, clock)).map(lambda element, _: element)


def _sleeping(tf: Any, ds: Any, wait_us: int) -> Any:
    """`ds` that sleeps `wait_us` before each element (tf.raw_ops.SleepDataset)."""
    flat = tf.nest.flatten(ds.element_spec)
    variant = tf.raw_ops.SleepDataset(
        input_dataset=tf.data.experimental.to_variant(ds),
        sleep_microseconds=tf.constant(wait_us, tf.int64),
        output_types=[spec.dtype for spec in flat],
        output_shapes=[spec.shape for spec in flat],
    )
    return tf.data.experimental.from_variant(variant, ds.element_spec)
