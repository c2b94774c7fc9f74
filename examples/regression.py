"""A regression: a float target from 8 features, a small MLP compiled with MSE.

`sample_configs/regression.toml` trains it. The model function takes the data's element_spec
and compiles its own loss and metric, which distagent keeps (the optimizer is the config's).
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

FEATURES = 8
HIDDEN = 32
EXAMPLES = 2048


def dataset() -> tf.data.Dataset:
    """(features float32[8], target float32): a linear function with a bend, plus noise."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((EXAMPLES, FEATURES)).astype(np.float32)
    w = rng.standard_normal(FEATURES).astype(np.float32)
    y = x @ w + np.sin(2.0 * x[:, 0]) + 0.1 * rng.standard_normal(EXAMPLES)
    return tf.data.Dataset.from_tensor_slices((x, y.astype(np.float32)))


def model(element_spec: Any) -> keras.Model:
    features = element_spec[0]
    inputs = keras.Input(shape=features.shape)
    x = keras.layers.Dense(HIDDEN, activation="relu")(inputs)
    x = keras.layers.Dense(HIDDEN, activation="relu")(x)
    outputs = keras.layers.Dense(1, dtype="float32")(x)
    net = keras.Model(inputs, outputs, name="regression_mlp")
    net.compile(loss="mse", metrics=["mae"])
    return net
