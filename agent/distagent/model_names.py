"""The model names a config may use, without importing Keras (the config and the plan never
load TensorFlow). tests/agent/test_models.py checks KERAS_APPLICATIONS against
keras.applications."""

from __future__ import annotations

import re

BUILTIN_MODELS = ("mlp", "cnn", "resnet_small")

KERAS_APPLICATIONS = (
    "ConvNeXtBase", "ConvNeXtLarge", "ConvNeXtSmall", "ConvNeXtTiny", "ConvNeXtXLarge",
    "DenseNet121", "DenseNet169", "DenseNet201",
    "EfficientNetB0", "EfficientNetB1", "EfficientNetB2", "EfficientNetB3", "EfficientNetB4",
    "EfficientNetB5", "EfficientNetB6", "EfficientNetB7",
    "EfficientNetV2B0", "EfficientNetV2B1", "EfficientNetV2B2", "EfficientNetV2B3",
    "EfficientNetV2L", "EfficientNetV2M", "EfficientNetV2S",
    "InceptionResNetV2", "InceptionV3",
    "MobileNet", "MobileNetV2", "MobileNetV3Large", "MobileNetV3Small",
    "NASNetLarge", "NASNetMobile",
    "ResNet101", "ResNet101V2", "ResNet152", "ResNet152V2", "ResNet50", "ResNet50V2",
    "VGG16", "VGG19", "Xception",
)
"""keras.applications constructors (Keras 3.10+), built with weights=None."""


def is_known_model(name: str) -> bool:
    return (name in BUILTIN_MODELS or name in KERAS_APPLICATIONS
            or re.fullmatch(r"[\w.]+:\w+", name) is not None)


MODEL_CHOICES = ", ".join(BUILTIN_MODELS) + ', a keras.applications name ("ResNet50", ...) or ' \
    '"package.module:function"'
