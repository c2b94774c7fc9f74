"""The job's model and objective, built and checked against the data before anything trains.

`plan` and `start` refuse the same things, each in one line naming the config key: a model
function that cannot be called or returns no keras.Model, a model that cannot take the data's
features, a loss or metric Keras does not know, labels the loss cannot take (a float or a
sequence for the classifier's loss, a class id out of range). Nothing is cast to fit.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np

from distagent.data import Source, element_spec
from distagent.flops import model_forward_flops
from distagent.models import build_model, check_model
from distagent.objective import (
    Objective,
    check_labels,
    label_sample,
    output_specs,
    resolve_objective,
)
from distagent.schema import JobConfig


def job_model(cfg: JobConfig, source: Source, spec: Any, *, sync_batchnorm: bool = False) -> Any:
    """The model of `cfg` for `source` (build it in the strategy's scope)."""
    return build_model(cfg.model.name, source.input_shape, source.num_classes,
                       hidden_units=cfg.model.hidden_units, sync_batchnorm=sync_batchnorm,
                       element_spec=spec)


def checked_objective(cfg: JobConfig, model: Any, source: Source, spec: Any) -> Objective:
    """The loss and metrics `model` trains with, refused in one line where the data's labels
    do not fit them."""
    objective = resolve_objective(cfg.train.loss, cfg.train.metrics, model)
    outputs = output_specs(model, spec[0])
    sample = None
    if any(o.sparse for o in objective.outputs):
        # Labels known to lie below num_classes: their extremes stand for them, nothing read.
        sample = np.array([0, source.num_classes - 1]) if source.class_ids_in_range \
            else label_sample(source.read(1))
    check_labels(objective, outputs, spec[1], sample)
    return objective


def check_job(cfg: JobConfig, source: Source) -> float | None:
    """Build the model once on the CPU, check its objective against the data and drop it;
    returns its forward FLOPs per example as TensorFlow counts them (None: not counted)."""
    import tensorflow as tf

    spec = element_spec(source)
    model = check_model(cfg.model.name, source.input_shape, source.num_classes,
                        hidden_units=cfg.model.hidden_units, element_spec=spec)
    checked_objective(cfg, model, source, spec)
    with tf.device("/CPU:0"):
        forward = model_forward_flops(model, spec[0])
    del model
    gc.collect()  # the variables of a large application: gone before the plan is printed
    return forward
