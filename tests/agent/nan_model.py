"""A user's model (`model.name = "tests.agent.nan_model:nan_mlp"`) whose output is NaN in one
forward pass of the whole job: the NAN_AFTER_ENV-th of a process that sets it, in the one
process that creates the file NAN_ONCE_ENV names (O_EXCL: the other worker, and any later
attempt of the job, find it there). One worker's NaN is enough: the loss and the gradients are
all-reduced, so every worker sees the same divergence and rolls back together."""

from __future__ import annotations

import os
from typing import Any

import keras
import tensorflow as tf

NAN_AFTER_ENV = "DISTMON_TEST_NAN_AFTER"
NAN_ONCE_ENV = "DISTMON_TEST_NAN_ONCE"
_calls = [0]


def _claimed(path: str) -> bool:
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def poison() -> float:
    """NaN once (see the module's docstring), else 1."""
    _calls[0] += 1
    after, once = os.environ.get(NAN_AFTER_ENV), os.environ.get(NAN_ONCE_ENV)
    if after is None or once is None or _calls[0] != int(after):
        return 1.0
    return float("nan") if _claimed(once) else 1.0


class NanLayer(keras.layers.Layer):
    def call(self, x: Any) -> Any:
        factor = tf.py_function(poison, [], tf.float32)
        factor.set_shape([])  # py_function's output has no known shape
        return x * factor

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape


def nan_mlp(input_shape: tuple[int, ...], num_classes: int) -> keras.Model:
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Dense(8, activation="relu")(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, NanLayer()(keras.layers.Dense(num_classes)(x)))
