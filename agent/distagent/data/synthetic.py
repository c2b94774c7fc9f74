"""A learnable, reproducible synthetic dataset: one prototype per class plus Gaussian noise.

Example i is generated from (seed, i) with stateless random ops, so the data is the same on every
run and every worker, costs no memory until cached, and needs no files. The prototypes are spread
so that two classes sit about six noise deviations apart whatever the input size: a small MLP
reaches high accuracy, but not on the first step.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from distagent.data import Source
from distagent.data.cost import LATENCY_PARALLELISM, spend_cpu, with_latency
from distagent.schema import JobConfig

CLASS_SEPARATION = 6.0
"""Distance between two class prototypes, in noise standard deviations."""


def prototypes(seed: int, num_classes: int, dim: int) -> np.ndarray:
    scale = CLASS_SEPARATION / math.sqrt(2.0 * dim)
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((num_classes, dim)) * scale).astype(np.float32)


def open_source(cfg: JobConfig) -> Source:
    syn = cfg.data.synthetic
    shape = tuple(syn.input_shape)
    dim = math.prod(shape)
    protos = prototypes(cfg.run.seed, syn.num_classes, dim)
    seed = cfg.run.seed

    def read(parallel: Any) -> Any:
        import tensorflow as tf

        table = tf.constant(protos)

        def example(index: Any) -> tuple[Any, Any]:
            key = tf.stack([tf.constant(seed, tf.int64), index])
            label = tf.random.stateless_uniform(
                [], key, minval=0, maxval=syn.num_classes, dtype=tf.int32
            )
            noise = tf.random.stateless_normal([dim], key + tf.constant([1, 0], tf.int64))
            features = tf.reshape(tf.gather(table, label) + noise, shape)
            return features, label

        # Reads stay in order even when parallel: the validation split is the first examples.
        ordered = {} if parallel == 1 else {"num_parallel_calls": parallel, "deterministic": True}
        ds = tf.data.Dataset.range(syn.num_examples).map(example, **ordered)
        if syn.read_latency_ms > 0:
            ds = with_latency(tf, ds, syn.read_latency_ms, parallel)
        return ds

    return Source(
        read=read,
        num_examples=syn.num_examples,
        input_shape=shape,
        num_classes=syn.num_classes,
        # Deterministic from the example: cached after the first pass like a decode would be.
        decode=_preprocess(syn.preprocess_cost_ms),
        example_bytes=dim * 4 + 4,
        read_latency_ms=syn.read_latency_ms,
        class_ids_in_range=True,
    )


__all__ = ["LATENCY_PARALLELISM", "open_source", "prototypes"]  # the pipeline's import


def _preprocess(cost_ms: float) -> Any:
    if cost_ms <= 0:
        return None

    def preprocess(features: Any, label: Any) -> tuple[Any, Any]:
        import tensorflow as tf

        return spend_cpu(tf, features, cost_ms), label

    return preprocess
