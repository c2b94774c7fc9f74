"""A small language model: next-token prediction over padded token sequences, masked.

`sample_configs/text.toml` trains it. Sequences of a few repeating patterns, of varying length,
are padded with token 0; the elements are (tokens, next tokens, mask) and the mask (the third
element: sample weights) keeps the padding out of the loss and the accuracy. The data comes
from a generator, so its size is unknown: the config gives train.steps_per_epoch. The factory
takes the input context and shards the data for its worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import keras
import numpy as np
import tensorflow as tf

VOCAB = 24
LENGTH = 16
PATTERNS = 4


def _sequences(seed: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    patterns = [rng.integers(1, VOCAB, rng.integers(2, 5)) for _ in range(PATTERNS)]
    while True:
        pattern = patterns[rng.integers(PATTERNS)]
        length = int(rng.integers(LENGTH // 2, LENGTH + 2))
        tokens = np.zeros(LENGTH + 1, np.int32)
        tokens[:length] = np.resize(pattern, length)[: LENGTH + 1]
        mask = (tokens[1:] != 0).astype(np.float32)
        yield tokens[:-1], tokens[1:], mask


def dataset(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
    spec = tf.TensorSpec((LENGTH,), tf.int32)
    signature = (spec, spec, tf.TensorSpec((LENGTH,), tf.float32))
    ds = tf.data.Dataset.from_generator(lambda: _sequences(3), output_signature=signature)
    return ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)


def model(element_spec: Any) -> keras.Model:
    tokens = keras.Input(shape=element_spec[0].shape, dtype="int32")
    x = keras.layers.Embedding(VOCAB, 16)(tokens)
    x = keras.layers.LSTM(32, return_sequences=True)(x)
    logits = keras.layers.Dense(VOCAB, dtype="float32")(x)
    return keras.Model(tokens, logits, name="text_lstm")
