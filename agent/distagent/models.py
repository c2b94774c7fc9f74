"""The builtin models, and the hook for a user's own.

Every model ends in a linear layer of `num_classes` logits (no softmax): the trainer's loss takes
logits, which is numerically safer, and under mixed precision the last layer computes in float32.
A keras.applications name ("ResNet50", "MobileNetV2", "EfficientNetB0", ...) builds that network
with `weights=None` (nothing is downloaded), the data's input shape, global average pooling and
the same logits head; where the labels are not class ids (num_classes 0) a builtin has one
output unit. A user model is named "package.module:function", called in the strategy's scope
in the first form it takes: `(input_shape, num_classes)` (a tuple of ints without the batch
dimension and an int: the classifier's contract, logits without softmax), `(element_spec)` (the
data's unbatched element_spec: (features, labels[, sample_weights]) of TensorSpecs, for models
with several inputs or outputs) or `()`. It returns a `keras.Model`, compiled or not (a
compiled model's loss and metrics hold, see objective.py). A function that takes none of these,
raises, or returns something else is refused in one line naming model.name.

BatchNorm: each replica normalises with its own batch's statistics (what Goyal et al. recommend,
and the cheapest: no all-reduce in the forward pass); `sync_batchnorm=True` rebuilds every
BatchNormalization layer with `synchronized=True`, which all-reduces the moments across replicas
(worth it when the per-replica batch is small).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import keras

from distagent.model_names import KERAS_APPLICATIONS, MODEL_CHOICES
from distagent.user_code import first_line, import_function, positional_count
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


BUILDER_FORMS = "(input_shape, num_classes), (element_spec) or ()"


def _user_model(spec: str, input_shape: tuple[int, ...], num_classes: int,
                element_spec: Any) -> Any:
    """The user's model, from the first form its function takes (see the module's doc)."""
    function = import_function(spec, "model.name")
    count = positional_count(function, (2, 1, 0))
    if count is None:
        raise ConfigError("model", "model.name", f"{spec} must take {BUILDER_FORMS}")
    if count == 2 and not input_shape:
        raise ConfigError("model", "model.name", f"{spec} takes (input_shape, num_classes), but "
                          "the data's features are not one tensor of known shape: take the "
                          "element_spec instead")
    args: tuple[Any, ...] = ((input_shape, max(num_classes, 1)), (element_spec,), ())[2 - count]
    try:
        return function(*args)
    except ConfigError:
        raise
    except Exception as err:  # the user's code: one line, the key named
        raise ConfigError("model", "model.name", f"{spec} raised {first_line(err)}") from None


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
    element_spec: Any = None,
) -> keras.Model:
    """A fresh model by builtin name, keras.applications name or "package.module:function"
    (build it in a strategy scope). `hidden_units` sizes the `mlp` builtin (None: its default);
    `sync_batchnorm` synchronizes BatchNorm statistics across replicas; `element_spec` is the
    data's, for a user function that takes it. num_classes 0 (labels that are not class ids):
    a builtin gets one output unit."""
    num_classes = max(int(num_classes), 1)
    shape = tuple(int(d) for d in input_shape)
    if ":" in name:
        model = _user_model(name, shape, int(num_classes), element_spec)
    elif not shape:
        raise ConfigError("model", "model.name", f"{name} takes one tensor of features of known "
                          'shape; for other data name your own "package.module:function"')
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
        raise ConfigError("model", "model.name",
                          f"{name!r} returned {type(model).__name__}, not a keras.Model")
    return with_synchronized_batchnorm(model) if sync_batchnorm else model


def check_model(name: str, input_shape: Sequence[int], num_classes: int, *,
                hidden_units: Sequence[int] | None = None, element_spec: Any = None) -> Any:
    """The model built once on the CPU, so that `plan` refuses what `start` would (a Keras
    application whose minimum input is larger than the data's, a `cnn` on vectors, a user
    function with the wrong signature): a ConfigError naming model.name, one line."""
    import tensorflow as tf

    try:
        with tf.device("/CPU:0"):
            return build_model(name, input_shape, num_classes, hidden_units=hidden_units,
                               element_spec=element_spec)
    except ConfigError:
        raise
    except (ValueError, TypeError) as err:  # a layer that cannot take this shape
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError("model", "model.name", f"{name} cannot take input shape "
                          f"{list(input_shape)}: {first[:300]}") from None
