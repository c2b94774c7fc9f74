"""What a job minimises and reports: the loss and metrics of each model output.

`train.loss` names a Keras loss ("mse", "binary_crossentropy", ...) or the user's
"package.module:function"; without it, the model's compiled loss holds, and a model nobody
compiled trains as a classifier (sparse categorical cross-entropy on logits). Each loss is
computed per example (reduction none, the sample weights applied, the mean over any further
axes such as a sequence's tokens); the train step sums a replica's per-example losses over the
global batch, as for the classifier. A model with several outputs sums their losses.

Metrics are per-example functions (Keras' MeanMetricWrapper metrics: "accuracy", "mae", ...,
or the user's function): the step sums them like the loss, so they are exact over an interval
and an epoch on any number of replicas. A metric that keeps state across batches (AUC,
precision) cannot be summed that way and is refused in one line.

`check_labels` compares the data's labels with what each loss takes (class ids of the right
shape and range for a sparse cross-entropy, a target of the output's shape for the rest) and
refuses a mismatch in one line, in `plan` and before `start` trains: nothing is cast to fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf

from distagent.user_code import first_line, import_function, is_spec
from distcore.errors import ConfigError

LABEL_SAMPLE = 4096
"""Labels read to check their class ids against the outputs' classes."""
_SPARSE = (keras.losses.sparse_categorical_crossentropy,)
_ACCURACY_FOR = {
    keras.losses.sparse_categorical_crossentropy: keras.metrics.sparse_categorical_accuracy,
    keras.losses.binary_crossentropy: keras.metrics.binary_accuracy,
    keras.losses.categorical_crossentropy: keras.metrics.categorical_accuracy,
}


@dataclass(frozen=True)
class Output:
    name: str
    """The output's name ("" for a model with one output)."""
    loss: Any
    """A keras Loss with reduction None: per-example (and per-token) values."""
    loss_name: str
    metrics: tuple[tuple[str, Any], ...] = ()
    """(tag, function(y_true, y_pred) -> per-example values)."""

    @property
    def sparse(self) -> bool:
        """The loss takes class ids (one per prediction), not targets shaped like the output."""
        return getattr(self.loss, "fn", None) in _SPARSE


@dataclass(frozen=True)
class Objective:
    outputs: tuple[Output, ...]

    @property
    def metric_tags(self) -> tuple[str, ...]:
        return tuple(tag for out in self.outputs for tag, _ in out.metrics)

    def counter_names(self) -> tuple[str, ...]:
        """The sums a step keeps: loss, each metric, examples (the classifier's three are the
        counters checkpoints have always held)."""
        return ("loss_sum", *(metric_counter(t) for t in self.metric_tags), "examples")

    def per_example_loss(self, labels: Any, preds: Any, weights: Any) -> Any:
        """The summed loss of every output, one value per example (float32)."""
        total = None
        for out, y, p, w in self._pairs(labels, preds, weights):
            values = _per_example(out.loss(*_aligned(out, y, p), sample_weight=w))
            total = values if total is None else total + values
        return total

    def stats(self, labels: Any, preds: Any, weights: Any, per_example: Any) -> Any:
        """[loss sum, metric sums..., examples] of one replica's batch, as float64."""
        sums = [tf.reduce_sum(tf.cast(per_example, tf.float64))]
        for out, y, p, w in self._pairs(labels, preds, weights):
            y, p = _aligned(out, y, p)
            for _, fn in out.metrics:
                values = _weighted_mean(tf.cast(fn(y, p), tf.float32), w)
                sums.append(tf.reduce_sum(tf.cast(values, tf.float64)))
        sums.append(tf.cast(tf.shape(per_example)[0], tf.float64))
        return tf.stack(sums)

    def _pairs(self, labels: Any, preds: Any, weights: Any) -> list[tuple[Output, Any, Any, Any]]:
        if len(self.outputs) == 1:
            return [(self.outputs[0], _only(labels), _only(preds), _only(weights))]
        return [(out, _part(labels, out.name, i), _part(preds, out.name, i),
                 _part(weights, out.name, i) if _structured(weights) else weights)
                for i, out in enumerate(self.outputs)]


def metric_counter(tag: str) -> str:
    return f"metric:{tag}"


def _structured(value: Any) -> bool:
    return isinstance(value, Mapping | list | tuple)


def _only(value: Any) -> Any:
    if isinstance(value, Mapping) and len(value) == 1:
        return next(iter(value.values()))
    if isinstance(value, list | tuple) and len(value) == 1:
        return value[0]
    return value


def _part(value: Any, name: str, index: int) -> Any:
    return value[name] if isinstance(value, Mapping) else value[index]


def _aligned(out: Output, y: Any, p: Any) -> tuple[Any, Any]:
    """Class ids stay integers; a target becomes float32 with the output's rank (a scalar
    target of a one-unit output gains its last axis). Predictions are computed in float32."""
    p = tf.cast(p, tf.float32) if p.dtype.is_floating else p
    if out.sparse:
        return y, p
    y = tf.cast(y, tf.float32)
    if y.shape.rank is not None and p.shape.rank is not None and y.shape.rank == p.shape.rank - 1:
        y = tf.expand_dims(y, -1)
    return y, p


def _per_example(values: Any) -> Any:
    values = tf.cast(values, tf.float32)
    if values.shape.rank is not None and values.shape.rank > 1:
        values = tf.reduce_mean(values, axis=list(range(1, values.shape.rank)))
    return values


def _weighted_mean(values: Any, weights: Any) -> Any:
    """Per example: the mean over any further axes, weighted by the sample weights."""
    if values.shape.rank == 0:  # a function that reduced the batch: its mean for every example
        return values
    if weights is None:
        return _per_example(values)
    w = tf.cast(weights, tf.float32)
    while w.shape.rank < values.shape.rank:
        w = tf.expand_dims(w, -1)
    w = tf.broadcast_to(w, tf.shape(values))
    axes = list(range(1, values.shape.rank))
    if not axes:
        return values * w
    return tf.math.divide_no_nan(tf.reduce_sum(values * w, axes), tf.reduce_sum(w, axes))


def output_names(model: keras.Model) -> tuple[str, ...]:
    """The model's outputs by name (dict keys for a dict of outputs); ("",) for one output."""
    try:
        out = model.output
    except (AttributeError, ValueError):  # a subclassed model: one output assumed
        return ("",)
    if isinstance(out, Mapping):
        return tuple(str(k) for k in out) if len(out) > 1 else ("",)
    if isinstance(out, list | tuple) and len(out) > 1:
        return tuple(str(n) for n in model.output_names)
    return ("",)


def resolve_objective(loss: str | tuple[tuple[str, str], ...],
                      metrics: tuple[str, ...] | tuple[tuple[str, str], ...],
                      model: keras.Model) -> Objective:
    """The loss and metrics of each output: the config's, else the model's compiled ones, else
    the classifier's. ConfigError (one line, the key named) for a name Keras does not know."""
    names = output_names(model)
    compiled = bool(getattr(model, "compiled", False))
    loss_key = "train.loss"
    if loss:
        losses = _per_output(loss, names, loss_key)
    elif compiled and getattr(model, "loss", None) is not None:
        loss_key = "model.name"
        losses = _per_output(_plain(model.loss, names), names, "model.name (its compiled loss)")
    else:
        losses = {n: keras.losses.SparseCategoricalCrossentropy(from_logits=True)
                  for n in names}
    metric_key = "train.metrics"
    if metrics:
        wanted = _metrics_per_output(metrics, names, metric_key)
    else:
        user = getattr(getattr(model, "_compile_metrics", None), "_user_metrics", None)
        if compiled and user:
            metric_key = "model.name (its compiled metrics)"
            wanted = _metrics_per_output(_plain(user, names, metrics=True), names, metric_key)
        else:
            classifier = not loss and not (compiled and getattr(model, "loss", None) is not None)
            wanted = {n: ["accuracy"] if classifier else [] for n in names}
    outputs = []
    for name in names:
        loss_object, loss_name = _loss(losses[name], loss_key)
        tags = [(f"{name}_{tag}" if name else tag, fn) for tag, fn in
                (_metric(m, loss_object, metric_key) for m in wanted[name])]
        outputs.append(Output(name, loss_object, loss_name, tuple(tags)))
    return Objective(tuple(outputs))


def _plain(value: Any, names: tuple[str, ...], *, metrics: bool = False) -> Any:
    """A compiled loss (or metrics) given per output as a list, keyed by output name. A list
    of metric names (not of lists) is for every output, as in Keras."""
    if not isinstance(value, list | tuple) or len(names) < 2 or len(value) != len(names):
        return value
    if metrics and not all(isinstance(v, list | tuple) or v is None for v in value):
        return value
    return {n: [] if v is None else v for n, v in zip(names, value, strict=True)}


def _per_output(value: Any, names: tuple[str, ...], key: str, *,
                missing: Any = None) -> dict[str, Any]:
    """`value` for each output: one for all, or a table by output name (an output the table
    leaves out gets `missing`; None: every output must be named)."""
    table = _table(value)
    if table is None:
        return {n: value for n in names}
    if names == ("",) and len(table) == 1:
        return {"": next(iter(table.values()))}
    unknown = sorted(set(table) - set(names))
    absent = [n for n in names if n not in table] if missing is None else []
    if unknown or absent:
        which = f"no output named {unknown[0]!r}" if unknown else f"nothing for {absent[0]!r}"
        raise ConfigError("config", key, f"{which}; the model's outputs are {list(names)}")
    return {n: table.get(n, missing) for n in names}


def _table(value: Any) -> dict[str, Any] | None:
    """A per-output table: a dict, or the config's (name, value) pairs; None for one value."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple) and value and \
            all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return dict(value)
    return None


def _metrics_per_output(value: Any, names: tuple[str, ...], key: str) -> dict[str, list[Any]]:
    if _table(value) is not None:
        table = _per_output(value, names, key, missing=[])
        return {n: list(v) if isinstance(v, list | tuple) else [v] for n, v in table.items()}
    items = list(value) if isinstance(value, list | tuple) else [value]
    return {n: items for n in names}


def _loss(spec: Any, key: str) -> tuple[Any, str]:
    """A keras Loss with reduction None, and its name."""
    from keras.src.losses.losses import LossFunctionWrapper

    if isinstance(spec, str) and is_spec(spec):
        function = import_function(spec, key)
        return LossFunctionWrapper(function, reduction=None, name=spec.partition(":")[2]), spec
    try:
        found = keras.losses.get(spec)
    except (ValueError, TypeError) as err:
        raise ConfigError("config", key, f"Keras knows no loss {spec!r} ({first_line(err)})") \
            from None
    if isinstance(found, keras.losses.Loss):
        config = {**found.get_config(), "reduction": None}
        return type(found).from_config(config), str(found.name)
    if callable(found):
        name = getattr(found, "__name__", str(spec))
        return LossFunctionWrapper(found, reduction=None, name=name), name
    raise ConfigError("config", key, f"{spec!r} is not a loss")


def _exact_match(y_true: Any, y_pred: Any) -> Any:
    """Keras' plain "accuracy" beside a loss it has no accuracy for: prediction == label."""
    return tf.cast(tf.equal(tf.cast(y_true, y_pred.dtype), y_pred), tf.float32)


def _metric(spec: Any, loss: Any, key: str) -> tuple[str, Any]:
    """(tag, per-example function) of one metric name, function or Keras metric."""
    if isinstance(spec, str) and spec in ("accuracy", "acc"):
        return "accuracy", _ACCURACY_FOR.get(getattr(loss, "fn", None), _exact_match)
    if isinstance(spec, str) and is_spec(spec):
        return spec.partition(":")[2], import_function(spec, key)
    try:
        found = keras.metrics.get(spec) if isinstance(spec, str) else spec
    except (ValueError, TypeError) as err:
        raise ConfigError("config", key, f"Keras knows no metric {spec!r} "
                          f"({first_line(err)})") from None
    from keras.src.metrics.reduction_metrics import MeanMetricWrapper

    tag = spec if isinstance(spec, str) else str(getattr(found, "name", "metric"))
    if isinstance(found, MeanMetricWrapper):
        fn, kwargs = found._fn, dict(found._fn_kwargs)
        return tag, (lambda y, p: fn(y, p, **kwargs)) if kwargs else fn
    if isinstance(found, keras.metrics.Metric):
        raise ConfigError("config", key, f"{tag!r} keeps state across batches; distagent sums "
                          "per-example metrics (accuracy, mae, mse, ... or a function)")
    if callable(found):
        return tag, found
    raise ConfigError("config", key, f"{spec!r} is not a metric")


def check_labels(objective: Objective, output_specs: Any, labels: Any,
                 sample: Any = None) -> None:
    """Refuse (one line) labels the losses cannot take. `output_specs`: the model's outputs for
    one example; `labels`: the data's label spec for one example; `sample`: labels read from
    the data (numpy, batched) to check class ids against the outputs' classes."""
    names = [out.name for out in objective.outputs]
    if len(names) > 1 and isinstance(labels, Mapping) and sorted(labels) != sorted(names):
        raise ConfigError("config", "data", f"the labels are keyed {sorted(labels)}; the "
                          f"model's outputs are {names}")
    if len(names) > 1 and not (isinstance(labels, Mapping) or (
            isinstance(labels, list | tuple) and len(labels) == len(names))):
        raise ConfigError("config", "data", f"the model has {len(names)} outputs {names}; the "
                          "labels are not one per output (a dict keyed by output name)")
    for i, out in enumerate(objective.outputs):
        if len(objective.outputs) == 1:
            y, p, s = _only(labels), _only(output_specs), _only(sample)
        else:
            y, p = _part(labels, out.name, i), _part(output_specs, out.name, i)
            s = _part(sample, out.name, i) if sample is not None else None
        _check_one(out, y, p, s)


def _check_one(out: Output, y: Any, p: Any, sample: Any) -> None:
    where = f"output {out.name!r}: " if out.name else ""
    y_shape, p_shape = list(y.shape), list(p.shape)
    if out.sparse:
        if not (y.dtype.is_integer or y.dtype.is_bool):
            raise ConfigError("config", "train.loss", f"{where}{out.loss_name} takes class ids, "
                              f"but the labels are {y.dtype.name} {y_shape}: set train.loss for "
                              'float targets (e.g. "mse")')
        if y_shape not in (p_shape[:-1], [*p_shape[:-1], 1]):
            raise ConfigError("config", "train.loss", f"{where}labels of shape {y_shape} do not "
                              f"fit outputs of shape {p_shape} ({out.loss_name} takes one class "
                              f"id per prediction: labels of shape {p_shape[:-1]})")
        _check_class_ids(where, sample, int(p_shape[-1]) if p_shape[-1] else 0)
        return
    if _squeezed(y_shape) != _squeezed(p_shape):
        raise ConfigError("config", "train.loss", f"{where}labels of shape {y_shape} do not fit "
                          f"outputs of shape {p_shape} ({out.loss_name} takes targets shaped "
                          "like the output)")


def _squeezed(shape: Sequence[Any]) -> list[Any]:
    dims = list(shape)
    while dims and dims[-1] == 1:
        dims.pop()
    return dims


def _check_class_ids(where: str, sample: Any, classes: int) -> None:
    if sample is None or classes <= 0 or getattr(sample, "size", 0) == 0:
        return
    low, high = int(sample.min()), int(sample.max())
    if low < 0 or high >= classes:
        bad = low if low < 0 else high
        raise ConfigError("config", "train.loss", f"{where}class id {bad} is out of range for "
                          f"{classes} output classes (ids 0 to {classes - 1})")


def output_specs(model: keras.Model, features: Any) -> Any:
    """The model's outputs for one example of `features` (a spec structure), found by tracing
    it; ConfigError naming model.name when the model cannot take them."""
    batched = tf.nest.map_structure(lambda s: tf.TensorSpec((1, *s.shape), s.dtype), features)
    try:
        with tf.device("/CPU:0"):
            traced = tf.function(lambda x: model(x, training=False)).get_concrete_function(batched)
    except Exception as err:  # the user's model: one line, the key named
        raise ConfigError("config", "model.name", f"the model cannot take the data's features "
                          f"{_describe(features)}: {first_line(err)}") from None
    return tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape[1:], t.dtype),
                                 traced.structured_outputs)


def _describe(spec: Any) -> str:
    def one(s: Any) -> str:
        return f"{s.dtype.name}{list(s.shape)}"

    if isinstance(spec, Mapping):
        return "{" + ", ".join(f"{k}: {one(v)}" for k, v in spec.items()) + "}"
    if isinstance(spec, list | tuple):
        return "(" + ", ".join(one(v) for v in tf.nest.flatten(spec)) + ")"
    return one(spec)


def label_sample(read: Any) -> Any:
    """Up to LABEL_SAMPLE labels of a source's first examples, as numpy (their structure)."""
    ds = read.map(lambda *element: element[1]).take(LABEL_SAMPLE).batch(LABEL_SAMPLE)
    for batch in ds.as_numpy_iterator():
        return batch
    return None
