"""The job config: one frozen dataclass per concern, nested into `JobConfig`.

Every field has a default and says what it means. Parsing, `--set` overrides and validation live
in `distagent.config`; this module is only the shape, so the plan, the pipeline and the trainer
can all depend on it without depending on TOML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

StrategyKind = Literal["mirrored", "multi_worker", "one_device"]
CrossDeviceOps = Literal["auto", "nccl", "hierarchical_copy", "one_device"]
SourceKind = Literal["synthetic", "tfrecord", "npz", "keras", "tfds"]
OptimizerName = Literal["sgd", "momentum", "adam", "adamw", "rmsprop"]
ScalingRule = Literal["linear", "sqrt", "none"]
DecayKind = Literal["none", "cosine", "step", "exponential"]
Tunable = Literal["autotune"] | int


@dataclass(frozen=True)
class RunConfig:
    name: str = "run"
    """Run name: the run directory is <logdir>/<name>."""
    logdir: str = "runs"
    """Where run directories are created (relative paths are relative to the working dir)."""
    seed: int = 42
    """Seeds the data, the model initialisation and shuffling."""


@dataclass(frozen=True)
class StrategyConfig:
    kind: StrategyKind = "mirrored"
    """mirrored: one machine, many GPUs; multi_worker: many machines; one_device: no strategy."""
    devices: tuple[str, ...] = ()
    """Devices to use ("GPU:0", ...); empty means all visible GPUs."""
    cpu_replicas: int = 0
    """>0: where no GPU is visible, split the CPU into N logical devices (tests, demos, laptops)."""
    cross_device_ops: CrossDeviceOps = "auto"
    """All-reduce implementation for MirroredStrategy; auto picks NCCL on GPUs."""


@dataclass(frozen=True)
class SyntheticConfig:
    num_examples: int = 4096
    num_classes: int = 10
    input_shape: tuple[int, ...] = (28, 28, 1)
    preprocess_cost_ms: float = 0.0
    """CPU time each example costs in the map, spent in TensorFlow ops (shows input-bound jobs)."""
    read_latency_ms: float = 0.0
    """A sleep per example, as remote storage behaves; parallel calls hide it."""


@dataclass(frozen=True)
class TFRecordConfig:
    files: str = ""
    """Glob of TFRecord files."""
    features: tuple[tuple[str, str], ...] = ()
    """Feature name -> spec, e.g. {image = "float32[28,28,1]", label = "int64"}."""


@dataclass(frozen=True)
class NpzConfig:
    path: str = ""
    """A .npz file with arrays `x` and `y`."""


@dataclass(frozen=True)
class KerasDataConfig:
    dataset: str = "mnist"
    """A keras.datasets name: mnist, fashion_mnist, cifar10, cifar100."""


@dataclass(frozen=True)
class TfdsConfig:
    name: str = ""
    split: str = "train"


@dataclass(frozen=True)
class DataConfig:
    source: SourceKind = "synthetic"
    per_replica_batch_size: int = 32
    shuffle_buffer: int = 10_000
    cache: bool = True
    parallel_calls: Tunable = "autotune"
    prefetch: Tunable = "autotune"
    deterministic: bool = False
    optimize: bool = True
    """false builds the naive pipeline (sequential map, no cache, no prefetch) for comparison."""
    validation_fraction: float = 0.1
    """Share of the examples held out for the validation run."""
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    tfrecord: TFRecordConfig = field(default_factory=TFRecordConfig)
    npz: NpzConfig = field(default_factory=NpzConfig)
    keras: KerasDataConfig = field(default_factory=KerasDataConfig)
    tfds: TfdsConfig = field(default_factory=TfdsConfig)


@dataclass(frozen=True)
class ModelConfig:
    name: str = "mlp"
    """A builtin ("mlp", "cnn", "resnet_small") or "pkg.module:function" returning a Keras model."""


@dataclass(frozen=True)
class OptimizerConfig:
    name: OptimizerName = "sgd"
    base_learning_rate: float = 0.01
    base_batch_size: int = 0
    """The batch the base rate was tuned for; 0 means per_replica_batch_size."""
    scaling: ScalingRule = "linear"
    warmup_epochs: float = 0.0
    """Gradual warmup (Goyal et al.) from base to the scaled rate over this many epochs."""
    decay: DecayKind = "none"


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 1
    steps_per_epoch: int = 0
    """0 = one pass over the data; more steps than one pass repeats the data."""
    log_every_steps: int = 10
    checkpoint_every_steps: int = 100
    mixed_precision: bool = False
    jit_compile: bool = False
    stop_on_nan: bool = True
    """NaN or infinite loss stops the run with status `diverged`."""


@dataclass(frozen=True)
class ClusterConfig:
    workers: tuple[str, ...] = ()
    """host:port of every worker, for multi_worker without TF_CONFIG or Slurm."""
    timeout_seconds: float = 60.0
    """How long a worker waits for a lost peer before failing with a clear message."""


@dataclass(frozen=True)
class JobConfig:
    run: RunConfig = field(default_factory=RunConfig)
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
