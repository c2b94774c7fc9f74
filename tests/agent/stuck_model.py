"""A user's model (`model.name = "tests.agent.stuck_model:stuck_mlp"`) whose layer blocks, in
Python, once it has run STUCK_AFTER_ENV forward passes in a process that sets that variable:
a worker stuck in its own code while its heartbeat goes on, as a user's layer that waits on a
lock or a remote service would be."""

from __future__ import annotations

import os
import time
from typing import Any

import keras
import tensorflow as tf

STUCK_AFTER_ENV = "DISTMON_TEST_STUCK_AFTER"
STUCK_JOB = """
[run]
name = "{name}"
logdir = "{logdir}"
[strategy]
kind = "multi_worker"
[data]
source = "synthetic"
per_replica_batch_size = 4
parallel_calls = 1
prefetch = 0
validation_fraction = 0.0
shuffle_buffer = 0
[data.synthetic]
num_examples = 4000
num_classes = 4
input_shape = [4]
[model]
name = "tests.agent.stuck_model:stuck_mlp"
[train]
epochs = 1
steps_per_epoch = 400
log_every_steps = 1
checkpoint_every_steps = 0
[cluster]
timeout_seconds = {timeout_seconds}
hang_seconds = {hang_seconds}
on_hang = "{on_hang}"
"""
"""A two-worker job of this model, fast steps logged at each one, for the hang tests."""
_calls = [0]


def wait_for_the_remote_service() -> float:
    """The user's code that never returns (it polls something that never answers)."""
    _calls[0] += 1
    limit = os.environ.get(STUCK_AFTER_ENV)
    while limit is not None and _calls[0] > int(limit):
        time.sleep(0.05)
    return 0.0


class StuckLayer(keras.layers.Layer):
    def call(self, x: Any) -> Any:
        done = tf.py_function(wait_for_the_remote_service, [], tf.float32)
        with tf.control_dependencies([done]):
            return tf.identity(x)

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape


def stuck_mlp(input_shape: tuple[int, ...], num_classes: int) -> keras.Model:
    inputs = keras.Input(shape=input_shape)
    x = StuckLayer()(keras.layers.Flatten()(inputs))
    x = keras.layers.Dense(8, activation="relu")(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))
