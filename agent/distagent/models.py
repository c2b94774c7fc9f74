"""The builtin models, and the hook for a user's own.

Every model ends in a linear layer of `num_classes` logits (no softmax): the trainer's loss takes
logits, which is numerically safer, and under mixed precision the last layer computes in float32.
A keras.applications name ("ResNet50", "MobileNetV2", "EfficientNetB0", ...) builds that network
with `weights=None` (nothing is downloaded), the data's input shape, global average pooling and
the same logits head. A user model is named "package.module:function"; the function takes
`(input_shape, num_classes)` (a tuple of ints without the batch dimension, e.g. (28, 28, 1), and
an int) and returns a `keras.Model` with the same contract (logits, no softmax); a function that
cannot be called so is refused in one line before anything is built. `check_model` builds the
model once for `plan`, so `plan` refuses what `start` would.

BatchNorm: each replica normalises with its own batch's statistics (what Goyal et al. recommend,
and the cheapest: no all-reduce in the forward pass); `sync_batchnorm=True` rebuilds every
BatchNormalization layer with `synchronized=True`, which all-reduces the moments across replicas
(worth it when the per-replica batch is small).
"""

from __future__ import annotations

import gc
import importlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any, cast

import keras

from distagent.model_names import KERAS_APPLICATIONS, MODEL_CHOICES
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


BUILDER_SIGNATURE = "(input_shape: tuple[int, ...], num_classes: int) -> keras.Model"


def _import_builder(spec: str) -> ModelBuilder:
    """The user's builder, checked to take `(input_shape, num_classes)` before it is called: a
    wrong signature is one line naming the function, not a TypeError from inside Keras."""
    module_name, _, attr = spec.partition(":")
    try:
        builder = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ConfigError("model", "model.name", f"cannot load {spec!r}: {err}") from err
    if not callable(builder):
        raise ConfigError("model", "model.name", f"{spec!r} is not a function")
    try:
        signature = inspect.signature(builder)
    except (TypeError, ValueError):  # a builtin without a signature: let the call decide
        return cast(ModelBuilder, builder)
    try:
        signature.bind((1,), 2)
    except TypeError as err:
        raise ConfigError("model", "model.name",
                          f"{spec}{signature} must take {BUILDER_SIGNATURE} ({err})") from None
    return cast(ModelBuilder, builder)


def keras_application(name: str, input_shape: tuple[int, ...], num_classes: int) -> keras.Model:
    """keras.applications.<name> without weights, pooled, with the logits head."""
    constructor = getattr(keras.applications, name)
    try:
        base = constructor(include_top=False, weights=None, input_shape=input_shape,
                           pooling="avg")
    except ValueError as err:  # e.g. an input smaller than the network's minimum
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError("model", "model.name",
                          f"{name} cannot take input shape {list(input_shape)}: {first}") from None
    return keras.Model(base.input, _logits(base.output, num_classes), name=name)


def with_synchronized_batchnorm(model: keras.Model) -> keras.Model:
    """A copy of `model` whose BatchNormalization layers all-reduce their moments across
    replicas (build it in the strategy's scope)."""

    def clone(layer: keras.layers.Layer) -> keras.layers.Layer:
        config = layer.get_config()
        if isinstance(layer, keras.layers.BatchNormalization):
            config["synchronized"] = True
        return type(layer).from_config(config)

    return keras.models.clone_model(model, clone_function=clone)


def build_model(
    name: str,
    input_shape: Sequence[int],
    num_classes: int,
    *,
    hidden_units: Sequence[int] | None = None,
    sync_batchnorm: bool = False,
) -> keras.Model:
    """A fresh model by builtin name, keras.applications name or "package.module:function"
    (build it in a strategy scope). `hidden_units` sizes the `mlp` builtin (None: its default);
    `sync_batchnorm` synchronizes BatchNorm statistics across replicas."""
    shape = tuple(int(d) for d in input_shape)
    if ":" in name:
        model = _import_builder(name)(shape, int(num_classes))
    elif name in BUILTINS:
        if name == "mlp" and hidden_units is not None:
            model = mlp(shape, int(num_classes), hidden_units)
        else:
            model = BUILTINS[name](shape, int(num_classes))
    elif name in KERAS_APPLICATIONS and hasattr(keras.applications, name):
        model = keras_application(name, shape, int(num_classes))
    else:
        raise ConfigError("model", "model.name", f"expected {MODEL_CHOICES}, got {name!r}")
    if not isinstance(model, keras.Model):
        raise ConfigError("model", "model.name", f"{name!r} returned {type(model).__name__}")
    return with_synchronized_batchnorm(model) if sync_batchnorm else model


def check_model(name: str, input_shape: Sequence[int], num_classes: int, *,
                hidden_units: Sequence[int] | None = None) -> float | None:
    """Build the model once on the CPU and drop it, so that `plan` refuses what `start` would
    (a Keras application whose minimum input is larger than the data's, a `cnn` on vectors, a
    user builder with the wrong signature): a ConfigError naming model.name, one line. Returns
    its forward pass's FLOPs per example as TensorFlow counts them (None: not counted)."""
    import tensorflow as tf

    from distagent.flops import model_forward_flops

    try:
        with tf.device("/CPU:0"):
            model = build_model(name, input_shape, num_classes, hidden_units=hidden_units)
    except ConfigError:
        raise
    except (ValueError, TypeError) as err:  # a layer that cannot take this shape
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError("model", "model.name", f"{name} cannot take input shape "
                          f"{list(input_shape)}: {first[:300]}") from None
    with tf.device("/CPU:0"):
        forward = model_forward_flops(model, input_shape)
    del model
    gc.collect()  # the variables of a large application: gone before the plan is printed
    return forward
