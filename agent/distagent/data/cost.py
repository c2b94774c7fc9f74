"""Simulated costs: CPU time spent in TensorFlow ops, and storage latency as a sleep.

CPU cost is a loop of cheap elementwise ops on a small vector. Two reasons it is not a matmul or
a Python loop: a Python busy loop (numpy_function) holds the GIL, so parallel calls cannot run
it side by side; and a large matmul is already spread over every core by TensorFlow's intra-op
thread pool, so on a 2-core machine the sequential map already uses both cores and a parallel
map has nothing left to gain (the 1.0x a first probe measured). Small elementwise ops run on one
core each, so N parallel calls use N cores, as real per-example decoding and augmentation do.
"""

from __future__ import annotations

import functools
import time
from typing import Any

_VECTOR = 64
_CALIBRATION_ITERATIONS = 5000


def _burn_graph(tf: Any) -> Any:
    def burn(x: Any, iterations: Any) -> Any:
        def body(i: Any, v: Any) -> tuple[Any, Any]:
            return i + 1, tf.math.sin(v) * 0.5 + 0.25

        _, out = tf.while_loop(lambda i, _: i < iterations, body, (tf.constant(0), x))
        return out

    return burn


@functools.lru_cache(maxsize=1)
def iterations_per_ms() -> float:
    """How many loop iterations take one millisecond of CPU inside a tf.data map, on this
    machine (best of 3; a tf.function called eagerly runs the same loop several times slower)."""
    import tensorflow as tf

    burn = _burn_graph(tf)
    elements = 8
    ds = tf.data.Dataset.range(elements).map(
        lambda i: burn(tf.fill([_VECTOR], tf.cast(i, tf.float32)), _CALIBRATION_ITERATIONS)
    )
    options = tf.data.Options()
    options.threading.max_intra_op_parallelism = 1
    ds = ds.with_options(options)
    best = float("inf")
    for _ in range(4):
        start = time.process_time()
        for _ in ds:
            pass
        best = min(best, (time.process_time() - start) / elements)
    return _CALIBRATION_ITERATIONS / max(best * 1000.0, 1e-6)


def spend_cpu(tf: Any, features: Any, cost_ms: float) -> Any:
    """`features`, returned only after about `cost_ms` of CPU work (inside a tf.data map)."""
    with tf.init_scope():  # calibrate eagerly, outside the dataset function being traced
        iterations = max(1, round(cost_ms * iterations_per_ms()))
    seed = tf.reshape(tf.cast(features, tf.float32), [-1])[:1]
    work = _burn_graph(tf)(tf.fill([_VECTOR], 0.0) + seed, tf.constant(iterations))
    # The result must feed the output, or the optimizer prunes the work (control dependencies
    # are not enough); 1e-30 × O(1) leaves float32 features unchanged bit for bit.
    return features + tf.cast(tf.reduce_mean(work) * 1e-30, features.dtype)


def add_latency(tf: Any, features: Any, latency_ms: float) -> Any:
    """`features` after a sleep of `latency_ms`; the sleep releases the GIL, so parallel calls
    overlap it, as parallel reads overlap a remote store's latency."""
    delay = latency_ms / 1000.0

    def wait(x: Any) -> Any:
        time.sleep(delay)
        return x

    out = tf.py_function(wait, [features], features.dtype)
    out.set_shape(features.shape)
    return out
