"""Example sources for the input pipeline: synthetic, tfrecord, npz, keras, tfds, images.

Each source says what it holds (size, shape, classes), reads its examples in a fixed order and
splits its per-example work in three: `decode` (deterministic and expensive: done once, then
cached), `preprocess` (deterministic and cheap, after the cache: e.g. uint8 -> float) and
`augment` (random, training only, new every pass). `distagent.pipeline` puts them in order with
the validation split, cache, shuffle, parallel maps, batch and prefetch.
TensorFlow is imported inside the functions, so the config and the plan never load it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from distagent.schema import JobConfig

Reader = Callable[[Any], Any]
"""Takes the parallelism (tf.data.AUTOTUNE, or 1 for the naive pipeline); returns a dataset of
(features, label) in a fixed order."""
Preprocess = Callable[[Any, Any], tuple[Any, Any]]


@dataclass(frozen=True)
class Source:
    read: Reader
    num_examples: int
    input_shape: tuple[int, ...]
    num_classes: int
    decode: Preprocess | None = None
    """Deterministic per-example work before the cache (decode, resize, simulated cost)."""
    preprocess: Preprocess | None = None
    """Cheap deterministic work after the cache, for training and validation alike."""
    augment: Preprocess | None = None
    """Random per-example work for training only, after the shuffle (flip, crop, brightness)."""
    num_files: int | None = None
    example_bytes: int | None = None
    """Bytes of one example in memory after reading: decides whether the cache fits."""
    read_latency_ms: float = 0.0
    """The source's simulated per-example storage latency (synthetic only)."""
    notes: tuple[str, ...] = ()
    """What the source left out and why (images skipped as unreadable): plan warnings."""


_MODULES = {
    "synthetic": "distagent.data.synthetic",
    "tfrecord": "distagent.data.tfrecord",
    "npz": "distagent.data.arrays",
    "keras": "distagent.data.arrays",
    "tfds": "distagent.data.tfds",
    "images": "distagent.data.images",
}


def open_source(cfg: JobConfig) -> Source:
    """The source `cfg.data.source` names, opened (files found, sizes known)."""
    module = importlib.import_module(_MODULES[cfg.data.source])
    source = module.open_source(cfg)
    assert isinstance(source, Source)
    return source
