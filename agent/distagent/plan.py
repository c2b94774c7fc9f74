"""The scaling plan: global batch, scaled learning rate, warmup, steps and warnings.

A pure function of the config and the resolved devices, so that `distagent plan` can print it
without training and every rule is a row in a table test.

- global batch = per-replica batch × replicas (replicas counted over all workers);
- linear: lr = base × global / base_batch (Goyal et al.);
- sqrt: lr = base × sqrt(global / base_batch);
- warmup steps = warmup_epochs × steps_per_epoch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from distagent.schema import JobConfig
from distcore.errors import ConfigError
from distcore.wording import counted

ADAPTIVE_OPTIMIZERS = ("adam", "adamw")
LARGE_GLOBAL_BATCH = 8192
"""Goyal et al. saw linear scaling hold up to this global batch and break down beyond it."""
FILE_SOURCES = ("tfrecord", "images")
"""Sources read from files that tf.data can shard by file across workers."""
TRAINING_MULTIPLIER = 3
"""PaLM's model FLOPs (Appendix B): the backward pass costs twice the forward."""
CACHE_BUDGET_BYTES = 2 * 1024**3
"""Above this estimated size the dataset is not cached in memory (the default budget; the
pipeline passes half of the memory available when it plans)."""


@dataclass(frozen=True)
class Plan:
    replicas: int
    devices: tuple[str, ...]
    workers: int
    per_replica_batch_size: int
    global_batch_size: int
    base_learning_rate: float
    base_batch_size: int
    scaling_rule: str
    learning_rate: float
    """The scaled rate the job trains at after warmup."""
    learning_rate_provenance: str
    """How the rate was derived, e.g. `0.01 @ batch 32 × 4 replicas (linear) = 0.04`."""
    warmup_epochs: float
    warmup_steps: int
    steps_per_epoch: int
    epochs: int
    total_steps: int
    num_examples: int | None
    """Examples in the source (before the validation split); None when unknown."""
    train_examples: int | None
    validation_examples: int
    validation_steps: int
    """Whole global batches in the validation split (0: no validation)."""
    shard_policy: str
    """tf.data autoshard policy across workers: FILE or DATA (OFF: the user's data factory
    shards by its input context)."""
    cache: bool
    pipeline: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    mixed_precision: bool = False
    """Compute in float16 with float32 variables (train.mixed_precision)."""
    jit_compile: bool = False
    """The step's maths compiled with XLA (train.jit_compile)."""
    forward_flops_per_example: float | None = None
    """TensorFlow's count of one example's forward pass (flops.py); None: not counted."""
    flops_per_example: float | None = None
    """Model FLOPs of training on one example: 3 × forward (PaLM's convention)."""
    flops_per_step: float | None = None
    """flops_per_example × the global batch."""
    peak_flops_per_second: float | None = None
    """The replicas' peak together (peak_devices × one device's); None: unknown, no MFU."""
    peak_source: str | None = None
    """Where one device's peak came from: a datasheet row, "measured (...)" or the config."""
    peak_devices: int = 0
    """Devices the peak counts: the GPUs, or the hosts whose cores CPU replicas share."""

    def to_json(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["devices"] = list(self.devices)
        out["pipeline"] = dict(self.pipeline)
        out["warnings"] = list(self.warnings)
        return out


WARNING_KINDS = {
    "adam_linear": "with linear scaling",
    "large_batch": "saw linear scaling break down",
    "no_warmup": "with no warmup",
    "smaller_than_batch": "training examples) is smaller than one global batch",
    "partial_batch": "final partial batch",
    "small_validation": "the validation split",
    "cache": "too big to cache",
    "few_files": "workers: sharding by data",  # "1 TFRecord file", "3 TFRecord files"
    "skipped_images": 'skipped (data.images.on_error = "skip")',  # "1 unreadable image"
}
"""A short name for each kind of warning, found by a phrase its text always contains."""


def warning_kind(text: str) -> str:
    """The kind of a plan warning (a key of WARNING_KINDS), or "other"."""
    return next((kind for kind, phrase in WARNING_KINDS.items() if phrase in text), "other")


def scaled_learning_rate(base: float, base_batch: int, global_batch: int, rule: str) -> float:
    ratio = global_batch / base_batch
    if rule == "linear":
        return base * ratio
    if rule == "sqrt":
        return base * math.sqrt(ratio)
    return base


def provenance(base: float, base_batch: int, per_replica: int, replicas: int, rule: str,
               rate: float) -> str:
    batch = f"batch {per_replica} × {counted(replicas, 'replica')}"
    if base_batch != per_replica:
        global_batch = per_replica * replicas
        batch = (f"batch {base_batch} → {global_batch} "
                 f"({per_replica} × {counted(replicas, 'replica')})")
    return f"{_num(base)} @ {batch} ({rule}) = {_num(rate)}"


def _num(value: float) -> str:
    return f"{value:.6g}"


def split_sizes(num_examples: int | None, validation_fraction: float) -> tuple[int | None, int]:
    """(train, validation) example counts; the validation share is rounded down."""
    if num_examples is None:
        return None, 0
    validation = int(num_examples * validation_fraction)
    return num_examples - validation, validation


def shard_policy(source: str, num_files: int | None, workers: int) -> tuple[str, list[str]]:
    """FILE when every worker can get whole files, else DATA (every worker reads everything)."""
    if source not in FILE_SOURCES or (source == "images" and num_files is None):
        return "DATA", []  # an images directory: every worker lists it, autoshard by data
    if num_files is not None and num_files >= workers:
        return "FILE", []
    files = ("an unknown number of TFRecord files" if num_files is None
             else f"only {counted(num_files, 'TFRecord file')}")
    warning = (
        f"{files} for {workers} workers: sharding by data "
        "(every worker reads every file and keeps 1/workers); write at least one file per worker"
    )
    return "DATA", [warning]


def make_plan(
    cfg: JobConfig,
    *,
    replicas: int,
    devices: Sequence[str],
    workers: int = 1,
    num_examples: int | None,
    held_out: int | None = None,
    num_files: int | None = None,
    example_bytes: int | None = None,
    cache_budget_bytes: int = CACHE_BUDGET_BYTES,
    notes: Sequence[str] = (),
) -> Plan:
    """The plan for `cfg` on `replicas` replicas in all (over `workers` workers); `notes` are
    the source's own warnings (images skipped as unreadable), first. `held_out`: the size of
    the source's own validation data (None: data.validation_fraction is split off)."""
    data, opt, train = cfg.data, cfg.optimizer, cfg.train
    per_replica = data.per_replica_batch_size
    global_batch = per_replica * replicas
    base_batch = opt.base_batch_size or per_replica
    rate = scaled_learning_rate(opt.base_learning_rate, base_batch, global_batch, opt.scaling)
    if held_out is None:
        train_examples, validation_examples = split_sizes(num_examples,
                                                          data.validation_fraction)
    else:
        train_examples, validation_examples = num_examples, held_out
    steps = _steps_per_epoch(train.steps_per_epoch, train_examples, global_batch)
    policy, warnings = shard_policy(data.source, num_files, workers)
    warnings[:0] = notes
    # A dataset of unknown size may not end: a cache of it would only grow.
    cache = bool(data.optimize and data.cache) and num_examples is not None
    in_memory = data.cache is True
    if cache and in_memory and _too_big(num_examples, example_bytes, cache_budget_bytes):
        cache = False
        warnings.append(f"the dataset (~{_gib(num_examples, example_bytes)} GiB decoded) is too "
                        f"big to cache in memory (budget {cache_budget_bytes / 1024**3:.1f} GiB, "
                        "half of what is free): not cached; set data.cache to a file path to "
                        "cache it on disk")
    warnings.extend(_scaling_warnings(cfg, rate, global_batch))
    warnings.extend(_data_warnings(train_examples, validation_examples, global_batch, replicas))
    return Plan(
        replicas=replicas,
        devices=tuple(devices),
        workers=workers,
        per_replica_batch_size=per_replica,
        global_batch_size=global_batch,
        base_learning_rate=opt.base_learning_rate,
        base_batch_size=base_batch,
        scaling_rule=opt.scaling,
        learning_rate=rate,
        learning_rate_provenance=provenance(
            opt.base_learning_rate, base_batch, per_replica, replicas, opt.scaling, rate
        ),
        warmup_epochs=opt.warmup_epochs,
        warmup_steps=round(opt.warmup_epochs * steps),
        steps_per_epoch=steps,
        epochs=train.epochs,
        total_steps=steps * train.epochs,
        num_examples=num_examples,
        train_examples=train_examples,
        validation_examples=validation_examples,
        validation_steps=validation_examples // global_batch,
        shard_policy=policy,
        cache=cache,
        pipeline=_pipeline_settings(cfg, cache),
        warnings=tuple(warnings),
        mixed_precision=train.mixed_precision,
        jit_compile=train.jit_compile,
    )


def with_flops(plan: Plan, forward_per_example: float | None) -> Plan:
    """The plan with its model FLOPs: 3 × forward per example, × the global batch per step."""
    if forward_per_example is None:
        return plan
    per_example = TRAINING_MULTIPLIER * forward_per_example
    return replace(plan, forward_flops_per_example=forward_per_example,
                   flops_per_example=per_example,
                   flops_per_step=per_example * plan.global_batch_size)


def with_peak(plan: Plan, per_device: float | None, source: str | None, devices: int) -> Plan:
    total = per_device * devices if per_device is not None else None
    return replace(plan, peak_flops_per_second=total, peak_source=source, peak_devices=devices)


def _steps_per_epoch(configured: int, train_examples: int | None, global_batch: int) -> int:
    if configured > 0:
        return configured
    if train_examples is None:
        raise ConfigError("config", "train.steps_per_epoch", "the data's size is unknown: set "
                          "train.steps_per_epoch to how many steps make an epoch")
    # A dataset smaller than one batch still trains (the data repeats); it gets a warning.
    return max(1, train_examples // global_batch)


def _too_big(num_examples: int | None, example_bytes: int | None,
             budget: int = CACHE_BUDGET_BYTES) -> bool:
    size = (num_examples or 0) * (example_bytes or 0)
    return size > budget


def _gib(num_examples: int | None, example_bytes: int | None) -> str:
    return f"{(num_examples or 0) * (example_bytes or 0) / 1024**3:.1f}"


def _scaling_warnings(cfg: JobConfig, rate: float, global_batch: int) -> list[str]:
    opt = cfg.optimizer
    base = opt.base_learning_rate
    warnings = []
    if opt.name in ADAPTIVE_OPTIMIZERS and opt.scaling == "linear" and rate != base:
        warnings.append(f"{opt.name} with linear scaling: adaptive optimizers usually need a "
                        'smaller increase; consider optimizer.scaling = "sqrt"')
    if global_batch > LARGE_GLOBAL_BATCH:
        warnings.append(f"global batch {global_batch} is above {LARGE_GLOBAL_BATCH}, where "
                        "Goyal et al. saw linear scaling break down; expect lower accuracy")
    if rate > base and opt.warmup_epochs == 0:
        warnings.append(f"the learning rate is scaled up ×{rate / base:.3g} with no warmup: early "
                        "steps may diverge; set optimizer.warmup_epochs (Goyal et al. use 5)")
    return warnings


def _data_warnings(train: int | None, validation: int, global_batch: int,
                   replicas: int) -> list[str]:
    if train is None:
        return []
    warnings = []
    if train < global_batch:
        warnings.append(f"the data ({train} training examples) is smaller than one global batch "
                        f"({global_batch}): every step repeats examples")
    elif train % global_batch:
        rest = train % global_batch
        warnings.append(
            f"{train} training examples leave a final partial batch of {rest}, which would give "
            f"the {replicas} replicas unequal shares: batches are kept whole (drop_remainder) "
            "and the rest rolls over into the next pass"
        )
    if 0 < validation < global_batch:
        warnings.append(f"the validation split ({counted(validation, 'example')}) is smaller "
                        "than one global "
                        f"batch ({global_batch}): no validation")
    return warnings


def _pipeline_settings(cfg: JobConfig, cache: bool) -> dict[str, Any]:
    data = cfg.data
    if not data.optimize:
        return {"optimize": False, "parallel_calls": 1, "prefetch": 0, "cache": False,
                "shuffle_buffer": data.shuffle_buffer, "deterministic": True}
    return {"optimize": True, "parallel_calls": data.parallel_calls, "prefetch": data.prefetch,
            "cache": (data.cache if isinstance(data.cache, str) else "memory") if cache else False,
            "shuffle_buffer": data.shuffle_buffer,
            "deterministic": data.deterministic}
