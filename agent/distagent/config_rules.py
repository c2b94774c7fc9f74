"""Value rules the types cannot express: ranges, and keys that another key makes required.

Checked once, after the types, so that every impossible value is refused before a job starts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from distagent.config_convert import Problem, show
from distagent.model_names import MODEL_CHOICES, is_known_model
from distagent.schema import JobConfig
from distagent.user_code import is_spec
from distcore.bounded import MAX_PRICE
from distcore.telemetry.peaks import MAX_PEAK_TFLOPS, MIN_PEAK_TFLOPS

MAX_SIMULATED_GPUS = 64
# Recovery must end: each rollback is a restore and a rerun of the window since the checkpoint,
# and run.json keeps every one. A factor below 1e-3 is no gentler rate but a stopped run.
MAX_RECOVERIES = 100
MIN_LR_FACTOR = 1e-3
# The learning-rate scale is a float32 variable: well above its smallest normal (1.2e-38), so
# the last rollback's rate is still a rate and not a 0 that trains nothing.
MIN_RECOVERED_RATE = 1e-30
_FEATURE_SPEC = re.compile(
    r"^(float32|float16|float64|int64|int32|uint8|string|bytes)(\[[0-9, ]*\])?$"
)


@dataclass(frozen=True)
class Rule:
    key: str
    ok: Callable[[Any], bool]
    expected: str


def _positive(v: Any) -> bool:
    return bool(v > 0) and math.isfinite(v)


def _at_least(low: float) -> Callable[[Any], bool]:
    return lambda v: bool(v >= low) and math.isfinite(v)


def _tunable(v: Any) -> bool:
    return v == "autotune" or (isinstance(v, int) and v >= 1)


def _fraction(v: Any) -> bool:
    return 0.0 <= v < 1.0


RULES: tuple[Rule, ...] = (
    Rule("run.name", lambda v: bool(v) and "/" not in v and v not in (".", ".."),
         "a non-empty name without '/'"),
    Rule("run.logdir", bool, "a non-empty path"),
    Rule("run.seed", _at_least(0), "an integer >= 0"),
    Rule("strategy.cpu_replicas", _at_least(0), "an integer >= 0"),
    Rule("data.per_replica_batch_size", _positive, "an integer > 0"),
    Rule("data.shuffle_buffer", _at_least(0), "an integer >= 0 (0 = no shuffle)"),
    Rule("data.parallel_calls", _tunable, '"autotune" or an integer >= 1'),
    Rule("data.prefetch", lambda v: v == "autotune" or v >= 0, '"autotune" or an integer >= 0'),
    Rule("data.validation_fraction", _fraction, "a number in [0, 1)"),
    Rule("data.synthetic.num_examples", _positive, "an integer > 0"),
    Rule("data.synthetic.num_classes", _at_least(2), "an integer >= 2"),
    Rule("data.synthetic.input_shape", lambda v: bool(v) and all(d > 0 for d in v),
         "a non-empty list of positive integers"),
    Rule("model.hidden_units", lambda v: bool(v) and all(d > 0 for d in v),
         "a non-empty list of positive integers"),
    Rule("data.synthetic.preprocess_cost_ms", _at_least(0), "a number >= 0"),
    Rule("data.synthetic.read_latency_ms", _at_least(0), "a number >= 0"),
    Rule("data.read_latency_ms", lambda v: 0 <= v <= 10_000, "a number of ms in [0, 10000]"),
    Rule("data.autotune_ram_budget_mib", _at_least(0), "an integer >= 0 (0 = TF's default)"),
    Rule("data.tfrecord.num_examples", _at_least(0), "an integer >= 0 (0 = count the records)"),
    Rule("data.tfrecord.num_classes", lambda v: v == 0 or v >= 2,
         "0 (the largest label + 1) or an integer >= 2"),
    Rule("data.tfrecord.features", lambda v: all(_FEATURE_SPEC.match(s) for _, s in v),
         'specs like "float32[28,28,1]" or "int64"'),
    Rule("model.name", is_known_model, MODEL_CHOICES),
    Rule("data.cache", lambda v: isinstance(v, bool) or bool(v.strip()),
         "true, false or a non-empty file path"),
    Rule("data.images.image_size", lambda v: len(v) == 2 and all(0 < d <= 4096 for d in v),
         "[height, width], each 1 to 4096"),
    Rule("data.images.num_examples", _at_least(0), "an integer >= 0 (0 = count the records)"),
    Rule("data.images.num_classes", lambda v: v == 0 or v >= 2,
         "0 (the largest label + 1) or an integer >= 2"),
    Rule("data.augment.crop", lambda v: 0.0 <= v < 1.0, "a number in [0, 1)"),
    Rule("data.augment.brightness", lambda v: 0.0 <= v <= 1.0, "a number in [0, 1]"),
    Rule("optimizer.base_learning_rate", _positive, "a number > 0"),
    Rule("optimizer.base_batch_size", _at_least(0), "an integer >= 0 (0 = per_replica_batch_size)"),
    Rule("optimizer.warmup_epochs", _at_least(0), "a number >= 0"),
    Rule("train.epochs", _positive, "an integer > 0"),
    Rule("train.steps_per_epoch", _at_least(0), "an integer >= 0 (0 = one pass over the data)"),
    Rule("train.log_every_steps", _positive, "an integer > 0"),
    Rule("train.steps_per_execution", _positive, "an integer > 0"),
    Rule("train.checkpoint_every_steps", _at_least(0), "an integer >= 0 (0 = only at the end)"),
    Rule("optimizer.clip_norm", _at_least(0), "a number >= 0 (0 = no clipping)"),
    Rule("train.max_recoveries", lambda v: 0 <= v <= MAX_RECOVERIES,
         f"an integer from 0 to {MAX_RECOVERIES}"),
    Rule("train.recovery_lr_factor", lambda v: MIN_LR_FACTOR <= v <= 1,
         f"a number in [{MIN_LR_FACTOR:g}, 1]"),
    Rule("train.loss_upper_bound", _at_least(0),
         "a number >= 0 (0 = loss_bound_factor x the first loss)"),
    Rule("train.loss_bound_factor", lambda v: math.isfinite(v) and (v == 0 or v >= 2),
         "0 (no bound) or a number >= 2"),
    Rule("train.histogram_every_steps", _at_least(0), "an integer >= 0 (0 = off)"),
    Rule("cluster.timeout_seconds", _positive, "a number > 0"),
    Rule("cluster.hang_seconds", lambda v: v == "auto" or _positive(v),
         '"auto" or a number of seconds > 0'),
    Rule("telemetry.interval_seconds", lambda v: 0.1 <= v <= 3600, "seconds from 0.1 to 3600"),
    Rule("profile.steps", lambda v: not v or (len(v) == 2 and 1 <= v[0] < v[1]),
         "[start, end] with 1 <= start < end, or [] (none)"),
    Rule("profile.input_bound_steps", _positive, "an integer > 0"),
    Rule("profile.interval_minutes", _positive, "a number of minutes > 0"),
    Rule("telemetry.simulate_gpus", lambda v: 0 <= v <= MAX_SIMULATED_GPUS,
         f"an integer from 0 to {MAX_SIMULATED_GPUS}"),
    Rule("telemetry.peak_tflops", lambda v: v == 0 or MIN_PEAK_TFLOPS <= v <= MAX_PEAK_TFLOPS,
         f"0 or TFLOP/s per device from {MIN_PEAK_TFLOPS:g} to {MAX_PEAK_TFLOPS:g} (0 = the "
         "datasheet's, or measured on CPUs)"),
    Rule("cost.price_gpu_hour", lambda v: 0 <= v <= MAX_PRICE,
         f"USD per GPU-hour from 0 to {MAX_PRICE:g} (0 = none)"),
    Rule("cost.price_kwh", lambda v: 0 <= v <= MAX_PRICE,
         f"USD per kWh from 0 to {MAX_PRICE:g} (0 = none)"),
)

# Upper bounds: values no machine can run, refused before TensorFlow loads (where they would
# fail deep inside it, or allocate without end). Separate from RULES so each message stays one.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
SEED_MAX = 2**32 - 1
MAX_CPU_REPLICAS = 256
_INT32 = "at most 2147483647 (int32)"


def _at_most(high: int) -> Callable[[Any], bool]:
    return lambda v: bool(v <= high)


def _each_at_most(high: int) -> Callable[[Any], bool]:
    return lambda v: all(d <= high for d in v)


LIMITS: tuple[Rule, ...] = (
    Rule("run.seed", _at_most(SEED_MAX), f"at most {SEED_MAX} (the largest seed NumPy takes)"),
    Rule("strategy.cpu_replicas", _at_most(MAX_CPU_REPLICAS),
         f"at most {MAX_CPU_REPLICAS} logical CPU devices"),
    Rule("data.per_replica_batch_size", _at_most(INT32_MAX), _INT32),
    Rule("optimizer.base_batch_size", _at_most(INT32_MAX), _INT32),
    Rule("data.synthetic.num_classes", _at_most(INT32_MAX), _INT32),
    Rule("data.tfrecord.num_classes", _at_most(INT32_MAX), _INT32),
    Rule("data.images.num_classes", _at_most(INT32_MAX), _INT32),
    Rule("data.synthetic.input_shape", lambda v: math.prod(v) <= INT32_MAX,
         "dimensions whose product is " + _INT32),
    Rule("model.hidden_units", _each_at_most(INT32_MAX), f"widths {_INT32}"),
    Rule("train.steps_per_execution", _at_most(INT32_MAX), _INT32),
    Rule("train.epochs", _at_most(INT32_MAX), _INT32),
    Rule("profile.steps", _each_at_most(INT64_MAX), "steps within int64 (the step counter)"),
    Rule("profile.input_bound_steps", _at_most(INT32_MAX), _INT32),
    Rule("data.autotune_ram_budget_mib", _at_most(INT64_MAX >> 20), "a budget within int64 bytes"),
)


def _lookup(cfg: Any, key: str) -> Any:
    for part in key.split("."):
        cfg = getattr(cfg, part)
    return cfg


def check_rules(cfg: JobConfig) -> list[Problem]:
    """Every broken rule as a problem; an empty list means the config can run."""
    problems = [
        Problem(rule.key, f"expected {rule.expected}, got {show(_lookup(cfg, rule.key))}")
        for rule in RULES + LIMITS
        if not rule.ok(_lookup(cfg, rule.key))
    ]
    problems.extend(_products(cfg))
    problems.extend(_recovery_floor(cfg))
    problems.extend(_required_by_source(cfg))
    problems.extend(_strategy_problems(cfg))
    if cfg.model.sync_batchnorm and cfg.train.jit_compile:
        problems.append(Problem("model.sync_batchnorm", "cannot be combined with train.jit_compile "
                                "(XLA compiles each replica's maths alone; synchronized "
                                "BatchNorm all-reduces inside it)"))
    if not cfg.train.stop_on_nan and cfg.train.on_divergence != "stop":
        problems.append(Problem("train.stop_on_nan", "false is on_divergence = \"continue\"; "
                                f"it cannot be combined with on_divergence = "
                                f"{show(cfg.train.on_divergence)} (set only on_divergence)"))
    return problems


def _required_by_source(cfg: JobConfig) -> Iterator[Problem]:
    data = cfg.data
    if data.source == "tfrecord":
        if not data.tfrecord.files:
            yield Problem("data.tfrecord.files", 'required by source = "tfrecord": a glob of files')
        names = [name for name, _ in data.tfrecord.features]
        if "label" not in names or len(names) < 2:
            yield Problem(
                "data.tfrecord.features",
                'required by source = "tfrecord": a "label" feature and at least one input feature',
            )
    if data.source == "npz" and not data.npz.path:
        yield Problem("data.npz.path", 'required by source = "npz": a .npz file with x and y')
    if data.source == "images" and bool(data.images.directory) == bool(data.images.files):
        yield Problem("data.images", 'required by source = "images": either directory (one '
                      "folder of images per class) or files (a glob of TFRecords), not both")
    if data.source == "python" and not data.python.factory:
        yield Problem("data.python.factory", 'required by source = "python": a '
                      '"package.module:function" returning a tf.data.Dataset')
    for key, spec in (("data.python.factory", data.python.factory),
                      ("data.python.validation_factory", data.python.validation_factory)):
        if spec and not is_spec(spec):
            yield Problem(key, f'expected "package.module:function", got {show(spec)}')
    if data.source == "tfds" and not data.tfds.name:
        yield Problem("data.tfds.name", 'required by source = "tfds": a TFDS dataset name')


def _strategy_problems(cfg: JobConfig) -> Iterator[Problem]:
    strategy = cfg.strategy
    if strategy.kind == "one_device" and len(strategy.devices) > 1:
        yield Problem("strategy.devices", 'expected at most one device for kind = "one_device"')
    bad = [d for d in strategy.devices if not re.fullmatch(r"(/.*)?(GPU|CPU|gpu|cpu):\d+", d)]
    if bad:
        yield Problem("strategy.devices", f'expected names like "GPU:0", got {show(bad[0])}')


def _recovery_floor(cfg: JobConfig) -> Iterator[Problem]:
    """Each key may be in range while the rate after the last rollback is 0 in float32."""
    train, base = cfg.train, cfg.optimizer.base_learning_rate
    in_range = all(rule.ok(_lookup(cfg, rule.key)) for rule in RULES if rule.key in (
        "train.max_recoveries", "train.recovery_lr_factor", "optimizer.base_learning_rate"))
    if train.on_divergence != "rollback" or not in_range:
        return
    last = base * train.recovery_lr_factor ** train.max_recoveries
    if last < MIN_RECOVERED_RATE:
        yield Problem("train.recovery_lr_factor",
                      f"expected base_learning_rate × recovery_lr_factor ** max_recoveries >= "
                      f"{MIN_RECOVERED_RATE:g}, got {last:.3g} (the last rollback would leave "
                      "a learning rate of 0)")


def _products(cfg: JobConfig) -> Iterator[Problem]:
    """Limits on products of keys: each key may be sane while their product is not."""
    train, syn = cfg.train, cfg.data.synthetic
    # steps_per_epoch = 0 is one pass over the data: at most one step per synthetic example.
    synthetic = cfg.data.source == "synthetic"
    per_epoch = train.steps_per_epoch or (syn.num_examples if synthetic else 0)
    if train.epochs > 0 and per_epoch > 0 and train.epochs * per_epoch > INT64_MAX:
        yield Problem("train.epochs",
                      "expected epochs × steps_per_epoch within int64 (the step counter)")
    size = math.prod(syn.input_shape)
    if synthetic and syn.num_classes > 0 and size > 0 and \
            syn.num_classes * size > INT32_MAX:
        yield Problem("data.synthetic.num_classes",
                      "expected num_classes × the input size " + _INT32 + " (class prototypes)")
