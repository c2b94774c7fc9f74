"""The builtin models, and the hook for a user's own.

Every model ends in a linear layer of `num_classes` logits (no softmax): the trainer's loss takes
logits, which is numerically safer, and under mixed precision the last layer computes in float32.
A user model is named "package.module:function"; the function takes `(input_shape, num_classes)`
and returns a Keras model with the same contract.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import keras

from distcore.errors import ConfigError

ModelBuilder = Callable[[tuple[int, ...], int], keras.Model]


def _logits(x: Any, num_classes: int) -> Any:
    return keras.layers.Dense(num_classes, dtype="float32", name="logits")(x)


def mlp(
    input_shape: tuple[int, ...], num_classes: int, hidden_units: Sequence[int] = (128, 64)
) -> keras.Model:
    """Dense hidden layers (default 128 and 64: cheap enough that the input pipeline shows in its
    step time)."""
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Flatten()(inputs)
    for units in hidden_units:
        x = keras.layers.Dense(int(units), activation="relu")(x)
    return keras.Model(inputs, _logits(x, num_classes), name="mlp")


def cnn(input_shape: tuple[int, ...], num_classes: int) -> keras.Model:
    """Two convolutions and a dense head (the Keras MNIST example): a step computes for a while."""
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Conv2D(32, 3, activation="relu")(inputs)
    x = keras.layers.Conv2D(64, 3, activation="relu")(x)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(128, activation="relu")(x)
    return keras.Model(inputs, _logits(x, num_classes), name="cnn")


def _residual_block(x: Any, filters: int, stride: int) -> Any:
    shortcut = x
    y = keras.layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(x)
    y = keras.layers.BatchNormalization()(y)
    y = keras.layers.Activation("relu")(y)
    y = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(y)
    y = keras.layers.BatchNormalization()(y)
    if stride != 1 or shortcut.shape[-1] != filters:
        shortcut = keras.layers.Conv2D(filters, 1, strides=stride, use_bias=False)(shortcut)
        shortcut = keras.layers.BatchNormalization()(shortcut)
    return keras.layers.Activation("relu")(keras.layers.Add()([y, shortcut]))


def resnet_small(input_shape: tuple[int, ...], num_classes: int) -> keras.Model:
    """A ResNet-8-like network (three stages of one block) for image inputs."""
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.Activation("relu")(x)
    for filters, stride in ((16, 1), (32, 2), (64, 2)):
        x = _residual_block(x, filters, stride)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, _logits(x, num_classes), name="resnet_small")


BUILTINS: dict[str, ModelBuilder] = {"mlp": mlp, "cnn": cnn, "resnet_small": resnet_small}


def _import_builder(spec: str) -> ModelBuilder:
    module_name, _, attr = spec.partition(":")
    try:
        builder = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ConfigError("model", "model.name", f"cannot load {spec!r}: {err}") from err
    if not callable(builder):
        raise ConfigError("model", "model.name", f"{spec!r} is not a function")
    return builder


def build_model(
    name: str,
    input_shape: Sequence[int],
    num_classes: int,
    *,
    hidden_units: Sequence[int] | None = None,
) -> keras.Model:
    """A fresh model by builtin name or "package.module:function" (build it in a strategy scope).
    `hidden_units` sizes the `mlp` builtin (None: its default)."""
    if ":" in name:
        builder = _import_builder(name)
    elif name in BUILTINS:
        builder = BUILTINS[name]
    else:
        allowed = ", ".join(sorted(BUILTINS))
        raise ConfigError("model", "model.name", f"expected {allowed} or pkg.module:function")
    shape = tuple(int(d) for d in input_shape)
    if name == "mlp" and hidden_units is not None:
        model = mlp(shape, int(num_classes), hidden_units)
    else:
        model = builder(shape, int(num_classes))
    if not isinstance(model, keras.Model):
        raise ConfigError("model", "model.name", f"{name!r} returned {type(model).__name__}")
    return model
