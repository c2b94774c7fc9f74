"""Example sources for the input pipeline: synthetic, tfrecord, npz, keras, tfds.

Each source says what it holds (size, shape, classes) and reads its examples in a fixed order;
`distagent.pipeline` adds the validation split, cache, shuffle, parallel map, batch and prefetch.
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
    preprocess: Preprocess | None = None
    """Per-example work done after the shuffle, in the parallel map (not cached)."""
    num_files: int | None = None
    example_bytes: int | None = None
    """Bytes of one example in memory after reading: decides whether the cache fits."""
    read_latency_ms: float = 0.0
    """The source's simulated per-example storage latency (synthetic only)."""


_MODULES = {
    "synthetic": "distagent.data.synthetic",
    "tfrecord": "distagent.data.tfrecord",
    "npz": "distagent.data.arrays",
    "keras": "distagent.data.arrays",
    "tfds": "distagent.data.tfds",
}


def open_source(cfg: JobConfig) -> Source:
    """The source `cfg.data.source` names, opened (files found, sizes known)."""
    module = importlib.import_module(_MODULES[cfg.data.source])
    source = module.open_source(cfg)
    assert isinstance(source, Source)
    return source
