"""Example sources for the input pipeline: synthetic, tfrecord, npz, keras, tfds, images.

Each source says what it holds (size, shape, classes), reads its examples in a fixed order and
splits its per-example work in three: `decode` (deterministic and expensive: done once, then
cached), `preprocess` (deterministic and cheap, after the cache: e.g. uint8 -> float) and
`augment` (random, training only, new every pass). `distagent.pipeline` puts them in order with
the validation split, cache, shuffle, parallel maps, batch and prefetch.
TensorFlow is imported inside the functions, so the config and the plan never load it.
"""

from __future__ import annotations

import dataclasses
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
    num_examples: int | None
    """None: unknown (a generator); the plan then needs train.steps_per_epoch."""
    input_shape: tuple[int, ...]
    """One example's features (); () where they are not one tensor of known shape."""
    num_classes: int
    """Largest class id + 1; 0 where the labels are not class ids (floats, sequences, dicts)."""
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
    """The simulated per-example storage latency of the source's reads (the pipeline gives
    such reads more threads than cores)."""
    notes: tuple[str, ...] = ()
    """What the source left out and why (images skipped as unreadable): plan warnings."""
    validation_read: Reader | None = None
    """The source's own validation data (finite), instead of a split of `read`'s."""
    validation_examples: int | None = None
    """Examples `validation_read` yields."""
    class_ids_in_range: bool = False
    """The labels are class ids below num_classes by construction (generated, or a folder's
    index): nothing to read to check them."""
    read_sharded: Callable[[Any], Any] | None = None
    """Given, it replaces `read` in training: it takes this worker's tf.distribute.InputContext
    and returns this worker's shard (the pipeline shards nothing more)."""


_MODULES = {
    "synthetic": "distagent.data.synthetic",
    "tfrecord": "distagent.data.tfrecord",
    "npz": "distagent.data.arrays",
    "keras": "distagent.data.arrays",
    "tfds": "distagent.data.tfds",
    "images": "distagent.data.images",
    "python": "distagent.data.python",
}


def open_source(cfg: JobConfig) -> Source:
    """The source `cfg.data.source` names, opened (files found, sizes known), behind the
    storage latency `data.read_latency_ms` says its reads have."""
    module = importlib.import_module(_MODULES[cfg.data.source])
    source = module.open_source(cfg)
    assert isinstance(source, Source)
    if cfg.data.read_latency_ms > 0:
        return with_read_latency(source, cfg.data.read_latency_ms)
    return source


def element_spec(source: Source) -> Any:
    """One training example's structure after the source's deterministic work (unbatched):
    what a model function with one argument is given, and what its FLOPs are traced from."""
    import tensorflow as tf

    ds = source.read(1)
    for step in (source.decode, source.preprocess):
        if step is not None:
            ds = ds.map(step)
    return ds.element_spec if isinstance(ds, tf.data.Dataset) else None


def with_read_latency(source: Source, latency_ms: float) -> Source:
    """`source` whose every read waits `latency_ms` first, as on a network filesystem or an
    object store. The wait costs no CPU (distagent.data.cost.with_latency): the optimized
    pipeline keeps many reads in flight and hides it, the naive one pays it once per example,
    one after the other, however many cores are free."""
    read = source.read

    def slow_read(parallel: Any) -> Any:
        import tensorflow as tf

        from distagent.data.cost import with_latency

        return with_latency(tf, read(parallel), latency_ms, parallel)

    return dataclasses.replace(source, read=slow_read,
                               read_latency_ms=source.read_latency_ms + latency_ms)
