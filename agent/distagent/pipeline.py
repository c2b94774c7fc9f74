"""The input pipeline: global-batch datasets ready for `strategy.experimental_distribute_dataset`.

Optimized (the default), in the tf.data guide's order: read (parallel interleave or map, in a
fixed order) -> decode (the source's deterministic work: parallel map) -> validation split ->
cache (in memory, or files under `data.cache`) -> shuffle -> repeat -> preprocess + augment (the
cheap and the random work: a second parallel map) -> batch(global, drop_remainder=True) ->
prefetch(AUTOTUNE), with options for determinism, the autotuner's RAM budget, the autoshard
policy and one intra-op thread per element. The expensive deterministic work is done once; the
random augmentation is new every pass. `data.optimize = false` does the same work with none of
that (sequential reads and maps, no cache, no prefetch), for comparison.

`drop_remainder=True` gives every step exactly global/replicas examples per replica; the
train dataset repeats forever and the trainer takes `plan.steps_per_epoch` steps per epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from distagent.data import Preprocess, Source, element_spec, open_source
from distagent.data.synthetic import LATENCY_PARALLELISM
from distagent.plan import Plan, make_plan
from distagent.schema import JobConfig


@dataclass(frozen=True)
class InputData:
    train: Any
    """tf.data.Dataset of (features, labels) global batches, repeating forever."""
    validation: Any
    """Finite tf.data.Dataset of whole global batches, or None (no validation split)."""
    num_examples: int | None
    """Examples in the source, before the validation split (None: unknown)."""
    input_shape: tuple[int, ...]
    num_classes: int
    element_spec: Any
    """One example's (features, labels[, sample_weights]) spec, unbatched."""
    source: Source
    shard_policy: str
    """The train dataset's tf.data autoshard policy (FILE or DATA); validation is always DATA.
    With FILE, each worker skips the first validation_examples of its own files, which holds
    the validation examples and a few training ones: no overlap, a little less training data."""


def plan_for(cfg: JobConfig, *, replicas: int, devices: Any, workers: int = 1,
             source: Source | None = None) -> Plan:
    """make_plan with the source's size, files and example size filled in (`source`: one
    already opened)."""
    source = source or open_source(cfg)
    plan = make_plan(
        cfg,
        replicas=replicas,
        devices=tuple(devices),
        workers=workers,
        num_examples=source.num_examples,
        held_out=_held_out(source),
        num_files=source.num_files,
        example_bytes=source.example_bytes,
        cache_budget_bytes=cache_budget(),
        notes=source.notes,
    )
    # The user's factory shards by its input context: tf.data shards nothing more.
    return replace(plan, shard_policy="OFF") if source.read_sharded is not None else plan


def _held_out(source: Source) -> int | None:
    """The size of the source's own validation data; None: split it off the training data.
    A factory that shards by its input context gets no split: each worker's shard differs, and
    a validation step that only some workers run would hang."""
    if source.validation_read is not None:
        return source.validation_examples
    return 0 if source.read_sharded is not None else None


def cache_budget() -> int:
    """Half of the memory available now: the in-memory cache must leave room for the rest."""
    import psutil

    return int(psutil.virtual_memory().available // 2)


def build_input(cfg: JobConfig, plan: Plan, *, strategy: Any = None,
                source: Source | None = None) -> InputData:
    """The train and validation datasets for `plan`; `strategy` names this worker's cache files
    when several workers cache into `data.cache` files."""
    import tensorflow as tf

    source = source or open_source(cfg)
    optimize = cfg.data.optimize
    parallel = tf.data.AUTOTUNE if optimize else 1
    read = source.read(parallel)
    spec = element_spec(source)
    if source.read_sharded is not None:  # the user's factory shards for this worker itself
        read = source.read_sharded(tf.distribute.InputContext(
            num_input_pipelines=plan.workers, input_pipeline_id=_task(strategy),
            num_replicas_in_sync=plan.replicas))
    validation_examples = plan.validation_examples if plan.validation_steps else 0
    own_validation = source.validation_read is not None
    # Split before decoding: skipped examples would otherwise be decoded only to be dropped.
    train_read = read if own_validation else read.skip(validation_examples)
    train = _train_stages(tf, cfg, plan, source, _decoded(tf, cfg, source, train_read),
                          "train" + _worker_suffix(plan, strategy))
    validation = None
    if validation_examples:
        held = source.validation_read(parallel) if source.validation_read is not None \
            else read.take(validation_examples)
        held_out = _decoded(tf, cfg, source, held)
        held_out = _cached(cfg, held_out, plan, "validation" + _worker_suffix(plan, strategy))
        validation = _batch_stages(tf, cfg, plan, _mapped(tf, cfg, held_out, source.preprocess))
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
        element_spec=spec,
        source=source,
        shard_policy=plan.shard_policy,
    )


def _task(strategy: Any) -> int:
    task = getattr(getattr(strategy, "cluster_resolver", None), "task_id", None)
    return int(task or 0)


def _decoded(tf: Any, cfg: JobConfig, source: Source, read: Any) -> Any:
    """The deterministic per-example work, after the split: parallel when optimized, and cached
    after this by the caller. Its order is free unless data.deterministic (the split is already
    made and a shuffle follows), so an image that decodes slowly does not hold up the rest."""
    if source.decode is None:
        return read
    if not cfg.data.optimize:
        return read.map(source.decode)
    calls = _tunable(tf, cfg.data.parallel_calls)
    return read.map(source.decode, num_parallel_calls=calls,
                    deterministic=cfg.data.deterministic)


def _cached(cfg: JobConfig, ds: Any, plan: Plan, part: str) -> Any:
    if not plan.cache:
        return ds
    if isinstance(cfg.data.cache, str):  # a file cache: one file set per split
        return ds.cache(f"{cfg.data.cache}-{part}")
    return ds.cache()


def _mapped(tf: Any, cfg: JobConfig, ds: Any, *functions: Preprocess | None) -> Any:
    """One map applying `functions` in turn (parallel when optimized); none: `ds` unchanged."""
    steps = [f for f in functions if f is not None]
    if not steps:
        return ds

    def apply(features: Any, label: Any) -> tuple[Any, Any]:
        for step in steps:
            features, label = step(features, label)
        return features, label

    calls = _tunable(tf, cfg.data.parallel_calls) if cfg.data.optimize else None
    return ds.map(apply, num_parallel_calls=calls)


def _worker_suffix(plan: Plan, strategy: Any) -> str:
    """Workers sharing a filesystem must not write the same cache files."""
    if plan.workers <= 1:
        return ""
    return f"-worker{_task(strategy)}"


def _train_stages(tf: Any, cfg: JobConfig, plan: Plan, source: Source, ds: Any,
                  cache_part: str) -> Any:
    ds = _cached(cfg, ds, plan, cache_part)
    if cfg.data.shuffle_buffer > 0:
        buffer = min(cfg.data.shuffle_buffer, plan.train_examples or cfg.data.shuffle_buffer)
        ds = ds.shuffle(max(buffer, 1), seed=cfg.run.seed, reshuffle_each_iteration=True)
    ds = _mapped(tf, cfg, ds.repeat(), source.preprocess, source.augment)
    return _batch_stages(tf, cfg, plan, ds)


def _batch_stages(tf: Any, cfg: JobConfig, plan: Plan, ds: Any) -> Any:
    optimize = cfg.data.optimize
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
