"""A user's model (`model.name = "tests.agent.deep_model:deep_narrow"`) whose step is compute,
not communication: one narrow Dense layer applied DEPTH times. Its few weights make the
cross-replica reduction a few kilobytes, so a worker's step is mostly its own input, forward
and backward pass, as in a real job whose model is not tiny.

Its input is slower on one host when told: in a process that sets SLOW_INPUT_ENV to a file's
path, each batch first waits the milliseconds that file holds (none while it is missing), as a
host whose storage got slower would. The test writes the file while the job runs; the other
workers never look.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

DEPTH = 24
WIDTH = 128
SLOW_INPUT_ENV = "DISTMON_TEST_SLOW_INPUT_FILE"


def input_delay_ms() -> float:
    """The extra milliseconds this host's input takes now (0: none)."""
    path = os.environ.get(SLOW_INPUT_ENV)
    if not path:
        return 0.0
    try:
        return max(0.0, float(Path(path).read_text() or 0))
    except (OSError, ValueError):  # not written yet, or half-written
        return 0.0


def read_batch() -> float:
    delay = input_delay_ms()
    if delay > 0:
        time.sleep(delay / 1000.0)
    return delay


class HostInput(keras.layers.Layer):
    """The batch, once this host's read of it has ended (every worker calls the same Python,
    so the healthy workers pay the same small cost)."""

    def call(self, x: Any) -> Any:
        done = tf.py_function(read_batch, [], tf.float32)
        with tf.control_dependencies([done]):
            return tf.identity(x)

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape


def deep_narrow(input_shape: tuple[int, ...], num_classes: int) -> keras.Model:
    inputs = keras.Input(shape=input_shape)
    x = HostInput()(keras.layers.Flatten()(inputs))
    x = keras.layers.Dense(WIDTH, activation="relu")(x)
    shared = keras.layers.Dense(WIDTH, activation="tanh")
    for _ in range(DEPTH):
        x = shared(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))
