"""In-memory arrays: a .npz file (`x`, `y`) or a keras.datasets dataset (downloaded on first
use into ~/.keras/datasets, as Keras does). Images stay uint8 in the cache and become float32
in [0, 1] in the parallel map."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np

from distagent.data import Source
from distagent.schema import JobConfig
from distcore.errors import DistmonError
from distcore.wording import counted


def open_source(cfg: JobConfig) -> Source:
    if cfg.data.source == "npz":
        x, y = _load_npz(Path(cfg.data.npz.path))
    else:
        x, y = _load_keras(cfg.data.keras.dataset)
    return arrays_source(x, y)


def _load_npz(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with np.load(path) as data:
            if "x" not in data or "y" not in data:
                raise DistmonError(f"data.npz.path: {path} holds {sorted(data.files)}; "
                                   "expected arrays x and y")
            return data["x"], data["y"]
    except (OSError, ValueError) as err:
        raise DistmonError(f"data.npz.path: cannot read {path}: {err}") from None


def _load_keras(name: str) -> tuple[np.ndarray, np.ndarray]:
    module = importlib.import_module(f"keras.datasets.{name}")
    try:
        (x, y), _ = module.load_data()
    except Exception as err:  # Keras raises a bare Exception for a failed download.
        raise DistmonError(
            f'data.keras.dataset = "{name}": could not load or download it '
            f"({_first_line(err)}); connect to the internet once or put the file in "
            "~/.keras/datasets"
        ) from None
    return x, y


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def arrays_source(x: np.ndarray, y: np.ndarray) -> Source:
    """A source over arrays already in memory: x (N, ...) numbers, y (N, ...) labels. Integer
    labels are class ids (int32; (N, 1) becomes (N,)); any other labels are float32 targets,
    never cast to ids: whether the loss can take them is the plan's to say."""
    if len(x) != len(y) or len(x) == 0:
        raise DistmonError(f"data: x has {counted(len(x), 'example')} and y {len(y)}; "
                           "expected the same, > 0")
    labels = np.asarray(y)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels.reshape(len(labels))
    class_ids = labels.dtype.kind in "iub"
    labels = labels.astype(np.int32 if class_ids else np.float32)
    if x.ndim == 3:  # (N, H, W) grayscale images: add the channel axis the models expect
        x = x[..., np.newaxis]
    images = x.dtype == np.uint8

    def read(parallel: Any) -> Any:
        import tensorflow as tf

        return tf.data.Dataset.from_tensor_slices((x, labels))

    def preprocess(features: Any, label: Any) -> tuple[Any, Any]:
        import tensorflow as tf

        scaled = tf.cast(features, tf.float32)
        return (scaled / 255.0 if images else scaled), label

    return Source(read=read, num_examples=len(x), input_shape=tuple(int(d) for d in x.shape[1:]),
                  num_classes=max(int(labels.max()) + 1, 2) if class_ids else 0,
                  preprocess=preprocess, example_bytes=int(x[0].nbytes + labels[0].nbytes))
