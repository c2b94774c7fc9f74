"""The input pipeline: global-batch datasets ready for `strategy.experimental_distribute_dataset`.

Optimized (the default): read (parallel, in a fixed order) -> validation split -> cache ->
shuffle -> repeat -> map(num_parallel_calls=AUTOTUNE) -> batch(global, drop_remainder=True) ->
prefetch(AUTOTUNE), with options for determinism, the autotuner's RAM budget, the autoshard
policy and one intra-op thread per element. `data.optimize = false` builds the same stages with
none of that (sequential reads and map, no cache, no prefetch), for comparison.

`drop_remainder=True` gives every step exactly global/replicas examples per replica; the
train dataset repeats forever and the trainer takes `plan.steps_per_epoch` steps per epoch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from distagent.data import Source, open_source
from distagent.data.synthetic import LATENCY_PARALLELISM
from distagent.plan import Plan, make_plan
from distagent.schema import JobConfig


@dataclass(frozen=True)
class InputData:
    train: Any
    """tf.data.Dataset of (features, labels) global batches, repeating forever."""
    validation: Any
    """Finite tf.data.Dataset of whole global batches, or None (no validation split)."""
    num_examples: int
    """Examples in the source, before the validation split."""
    input_shape: tuple[int, ...]
    num_classes: int
    shard_policy: str
    """The train dataset's tf.data autoshard policy (FILE or DATA); validation is always DATA.
    With FILE, each worker skips the first validation_examples of its own files, which holds
    the validation examples and a few training ones: no overlap, a little less training data."""


def plan_for(cfg: JobConfig, *, replicas: int, devices: Any, workers: int = 1) -> Plan:
    """make_plan with the source's size, files and example size filled in."""
    source = open_source(cfg)
    return make_plan(
        cfg,
        replicas=replicas,
        devices=tuple(devices),
        workers=workers,
        num_examples=source.num_examples,
        num_files=source.num_files,
        example_bytes=source.example_bytes,
    )


def build_input(cfg: JobConfig, plan: Plan, *, strategy: Any = None,
                source: Source | None = None) -> InputData:
    """The train and validation datasets for `plan` (strategy: unused, kept for the contract)."""
    import tensorflow as tf

    source = source or open_source(cfg)
    optimize = cfg.data.optimize
    read = source.read(tf.data.AUTOTUNE if optimize else 1)
    validation_examples = plan.validation_examples if plan.validation_steps else 0
    train = _train_stages(tf, cfg, plan, source, read.skip(validation_examples))
    validation = None
    if validation_examples:
        validation = _batch_stages(tf, cfg, plan, source, _cached(read.take(validation_examples),
                                                                  plan))
    options = _options(tf, cfg, plan, source, plan.shard_policy)
    # Validation is finite: file sharding would give workers with bigger files more batches,
    # and a collective step that only some workers run hangs. Data sharding splits it evenly.
    validation_options = _options(tf, cfg, plan, source, "DATA")
    return InputData(
        train=train.with_options(options),
        validation=None if validation is None else validation.with_options(validation_options),
        num_examples=source.num_examples,
        input_shape=source.input_shape,
        num_classes=source.num_classes,
        shard_policy=plan.shard_policy,
    )


def _cached(ds: Any, plan: Plan) -> Any:
    return ds.cache() if plan.cache else ds


def _train_stages(tf: Any, cfg: JobConfig, plan: Plan, source: Source, ds: Any) -> Any:
    ds = _cached(ds, plan)
    if cfg.data.shuffle_buffer > 0:
        buffer = min(cfg.data.shuffle_buffer, plan.train_examples or cfg.data.shuffle_buffer)
        ds = ds.shuffle(max(buffer, 1), seed=cfg.run.seed, reshuffle_each_iteration=True)
    return _batch_stages(tf, cfg, plan, source, ds.repeat())


def _batch_stages(tf: Any, cfg: JobConfig, plan: Plan, source: Source, ds: Any) -> Any:
    optimize = cfg.data.optimize
    if source.preprocess is not None:
        calls = _tunable(tf, cfg.data.parallel_calls) if optimize else None
        ds = ds.map(source.preprocess, num_parallel_calls=calls)
    batch_calls = tf.data.AUTOTUNE if optimize else None
    ds = ds.batch(plan.global_batch_size, drop_remainder=True, num_parallel_calls=batch_calls)
    if optimize and cfg.data.prefetch != 0:
        ds = ds.prefetch(_tunable(tf, cfg.data.prefetch))
    return ds


def _tunable(tf: Any, value: str | int) -> int:
    return int(tf.data.AUTOTUNE) if value == "autotune" else int(value)


def _options(tf: Any, cfg: JobConfig, plan: Plan, source: Source, shard_policy: str) -> Any:
    options = tf.data.Options()
    policy = getattr(tf.data.experimental.AutoShardPolicy, shard_policy)
    options.experimental_distribute.auto_shard_policy = policy
    if not cfg.data.optimize:
        # The naive pipeline: nothing tuned, nothing injected behind the user's back.
        options.autotune.enabled = False
        options.experimental_optimization.inject_prefetch = False
        options.deterministic = True
        return options
    options.deterministic = cfg.data.deterministic
    options.autotune.enabled = True
    if cfg.data.autotune_ram_budget_mib > 0:
        options.autotune.ram_budget = cfg.data.autotune_ram_budget_mib * 1024 * 1024
    # Parallelism comes from parallel calls, one element per core; letting each element's ops
    # also fan out over the intra-op pool makes them compete for the same cores.
    options.threading.max_intra_op_parallelism = 1
    if source.read_latency_ms > 0:
        # Reads that wait on storage hold a thread each: give them more threads than cores.
        options.threading.private_threadpool_size = LATENCY_PARALLELISM + 4
    return options
