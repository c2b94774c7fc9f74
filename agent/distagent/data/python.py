"""The user's own tf.data pipeline: `[data.python] factory = "package.module:function"`.

The function returns a `tf.data.Dataset` of unbatched `(features, labels)` or
`(features, labels, sample_weights)` elements, where features and labels may each be a tensor,
a tuple or a dict (several inputs, several outputs). distagent does to it what it does to every
source: the validation split, cache, shuffle, repeat, batch by the global batch, prefetch,
AUTOTUNE, sharding across workers. A function with one argument gets this worker's
`tf.distribute.InputContext` and shards the data itself.

What the plan needs comes from the dataset: its size from `cardinality()` (unknown for a
generator: the plan then asks for train.steps_per_epoch), the class count from its integer
labels (read once when the size is known), one example's bytes from its element_spec.
"""

from __future__ import annotations

import math
from typing import Any

from distagent.data import Source
from distagent.schema import JobConfig
from distagent.user_code import first_line, import_function, positional_count
from distcore.errors import ConfigError

MAX_COUNTED_EXAMPLES = 10_000_000
"""Class ids are read from a dataset of known size up to this many examples."""


def open_source(cfg: JobConfig) -> Source:
    import tensorflow as tf

    python = cfg.data.python
    make = _factory(python.factory, "data.python.factory")
    dataset = make(None)
    spec = _checked_spec(dataset, "data.python.factory")
    size = _cardinality(tf, dataset)
    validation_read = None
    validation_examples = None
    if python.validation_factory:
        make_validation = _factory(python.validation_factory, "data.python.validation_factory")
        held_out = make_validation(None)
        if _checked_spec(held_out, "data.python.validation_factory") != spec:
            raise ConfigError("config", "data.python.validation_factory",
                              f"its elements are {held_out.element_spec}, the factory's {spec}")
        validation_examples = _cardinality(tf, held_out)
        if validation_examples is None:  # finite, but of unknown size: counted once
            validation_examples = int(held_out.reduce(0, lambda count, _: count + 1))
        validation_read = _reader(make_validation)
    features = spec[0]
    shape = features.shape if isinstance(features, tf.TensorSpec) else None
    input_shape = tuple(int(d) for d in shape) if shape is not None and \
        shape.is_fully_defined() else ()
    return Source(
        read=_reader(make), num_examples=size, input_shape=input_shape,
        num_classes=_num_classes(tf, dataset, spec[1], size),
        example_bytes=_example_bytes(tf, spec), validation_read=validation_read,
        validation_examples=validation_examples,
        read_sharded=make if _takes_context(python.factory) else None,
    )


def _takes_context(spec: str) -> bool:
    return positional_count(import_function(spec, "data.python.factory"), (0, 1)) == 1


def _factory(spec: str, key: str) -> Any:
    """`make(context)`: the user's dataset, called with the InputContext when the function
    takes one (a default, single-pipeline context where none is given)."""
    import tensorflow as tf

    function = import_function(spec, key)
    count = positional_count(function, (0, 1))
    if count is None:
        raise ConfigError("config", key, f"{spec} must take no argument or an input_context")

    def make(context: Any) -> Any:
        try:
            if count == 0:
                return function()
            return function(context or tf.distribute.InputContext())
        except Exception as err:  # the user's code: one line, the key named
            raise ConfigError("config", key, f"{spec} raised {first_line(err)}") from None

    return make


def _reader(make: Any) -> Any:
    def read(parallel: Any) -> Any:
        return make(None)

    return read


def _checked_spec(dataset: Any, key: str) -> tuple[Any, ...]:
    import tensorflow as tf

    if not isinstance(dataset, tf.data.Dataset):
        raise ConfigError("config", key, f"returned {type(dataset).__name__}, not a "
                          "tf.data.Dataset")
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) not in (2, 3):
        raise ConfigError("config", key, f"its elements are {spec}; expected (features, labels) "
                          "or (features, labels, sample_weights)")
    return spec


def _cardinality(tf: Any, dataset: Any) -> int | None:
    size = int(dataset.cardinality())
    return size if size >= 0 else None


def _num_classes(tf: Any, dataset: Any, labels: Any, size: int | None) -> int:
    """Largest class id + 1 for integer labels of one value per example, read once; 0 for any
    other labels, or where the size is unknown."""
    if not isinstance(labels, tf.TensorSpec) or not labels.dtype.is_integer or size is None \
            or size > MAX_COUNTED_EXAMPLES or labels.shape.num_elements() != 1:
        return 0
    largest = dataset.map(lambda *element: tf.reduce_max(tf.cast(element[1], tf.int64))) \
        .reduce(tf.constant(-1, tf.int64), tf.maximum)
    return max(int(largest) + 1, 0)


def _example_bytes(tf: Any, spec: Any) -> int | None:
    total = 0
    for part in tf.nest.flatten(spec):
        if not isinstance(part, tf.TensorSpec) or not part.shape.is_fully_defined():
            return None
        total += math.prod(part.shape) * part.dtype.size
    return int(total)
