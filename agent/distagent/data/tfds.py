"""TensorFlow Datasets (optional: needs the tensorflow-datasets package and its data)."""

from __future__ import annotations

import importlib
from typing import Any

from distagent.data import Source
from distagent.schema import JobConfig
from distcore.errors import DistmonError


def open_source(cfg: JobConfig) -> Source:
    try:
        tfds = importlib.import_module("tensorflow_datasets")
    except ImportError:
        raise DistmonError('data.source = "tfds" needs the tensorflow-datasets package '
                           "(pip install tensorflow-datasets)") from None
    name, split = cfg.data.tfds.name, cfg.data.tfds.split
    try:
        builder = tfds.builder(name)
        builder.download_and_prepare()
    except Exception as err:  # TFDS raises many types for unknown names and failed downloads
        raise DistmonError(f"data.tfds: cannot prepare {name!r}: {err}") from None
    info = builder.info
    image_key = next(k for k in info.features if k != "label")
    shape = tuple(int(d) for d in info.features[image_key].shape)

    def read(parallel: Any) -> Any:
        return builder.as_dataset(split=split, as_supervised=True, shuffle_files=False)

    def preprocess(features: Any, label: Any) -> tuple[Any, Any]:
        import tensorflow as tf

        return tf.cast(features, tf.float32) / 255.0, tf.cast(label, tf.int32)

    return Source(read=read, num_examples=int(info.splits[split].num_examples),
                  input_shape=shape, num_classes=int(info.features["label"].num_classes),
                  preprocess=preprocess, example_bytes=None)
