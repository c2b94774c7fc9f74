"""Two inputs in a dict of features, two outputs: a price (regression) and a kind (3 classes).

`sample_configs/two_inputs.toml` trains it with a loss and a metric per output name. The
factories return (features dict, labels dict) elements; the validation data is its own.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

NUMBERS = 6
CATEGORIES = 5
KINDS = 3


def _data(seed: int, examples: int) -> tf.data.Dataset:
    rng = np.random.default_rng(seed)
    numbers = rng.standard_normal((examples, NUMBERS)).astype(np.float32)
    category = rng.integers(0, CATEGORIES, examples).astype(np.int32)
    price = numbers[:, :3].sum(axis=1) + 0.5 * category
    kind = (numbers[:, 3] > 0).astype(np.int32) + (category >= 3).astype(np.int32)
    features = {"numbers": numbers, "category": category}
    labels = {"price": price.astype(np.float32), "kind": kind}
    return tf.data.Dataset.from_tensor_slices((features, labels))


def dataset() -> tf.data.Dataset:
    return _data(11, 1536)


def validation() -> tf.data.Dataset:
    return _data(12, 256)


def model() -> keras.Model:
    numbers = keras.Input(shape=(NUMBERS,), name="numbers")
    category = keras.Input(shape=(), dtype="int32", name="category")
    embedded = keras.layers.Embedding(CATEGORIES, 4)(category)
    x = keras.layers.Concatenate()([numbers, embedded])
    x = keras.layers.Dense(32, activation="relu")(x)
    price = keras.layers.Dense(1, name="price", dtype="float32")(x)
    kind = keras.layers.Dense(KINDS, activation="softmax", name="kind", dtype="float32")(x)
    return keras.Model({"numbers": numbers, "category": category},
                       {"price": price, "kind": kind}, name="two_inputs")
