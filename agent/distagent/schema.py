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
SourceKind = Literal["synthetic", "tfrecord", "npz", "keras", "tfds", "images", "python"]
OptimizerName = Literal["sgd", "momentum", "adam", "adamw", "rmsprop"]
ScalingRule = Literal["linear", "sqrt", "none"]
DecayKind = Literal["none", "cosine", "step", "exponential"]
DivergenceAction = Literal["stop", "rollback", "continue"]
HangAction = Literal["warn", "abort"]
KerasDataset = Literal["mnist", "fashion_mnist", "cifar10", "cifar100"]
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
    """Class prototypes plus noise, generated per example from the seed: learnable, reproducible."""

    num_examples: int = 4096
    """Examples in the dataset (the validation share included)."""
    num_classes: int = 10
    input_shape: tuple[int, ...] = (28, 28, 1)
    """Shape of one example's features, e.g. [28, 28, 1] or [64]."""
    preprocess_cost_ms: float = 0.0
    """CPU time each example costs in the map, spent in TensorFlow ops (shows input-bound jobs)."""
    read_latency_ms: float = 0.0
    """A sleep per example, as remote storage behaves; parallel calls hide it."""


@dataclass(frozen=True)
class TFRecordConfig:
    files: str = ""
    """Glob of TFRecord files."""
    features: tuple[tuple[str, str], ...] = ()
    """Feature name -> spec, e.g. {image = "float32[28,28,1]", label = "int64"}; "label" and one
    input feature (float32/int64 with a shape, or uint8 bytes decoded to the shape)."""
    num_examples: int = 0
    """Records in all files; 0 = count them by reading the labels once at start."""
    num_classes: int = 0
    """0 = the largest label + 1, found by the same count."""


@dataclass(frozen=True)
class NpzConfig:
    path: str = ""
    """A .npz file with arrays `x` and `y`."""


@dataclass(frozen=True)
class KerasDataConfig:
    dataset: KerasDataset = "mnist"
    """A keras.datasets name; downloaded into ~/.keras/datasets on first use."""


@dataclass(frozen=True)
class TfdsConfig:
    name: str = ""
    """A TensorFlow Datasets name (needs the tensorflow-datasets package), e.g. "mnist"."""
    split: str = "train"
    """The split to train on; validation_fraction is held out of it."""


@dataclass(frozen=True)
class ImagesConfig:
    """Encoded images (JPEG, PNG): decoded and resized once, cached, then augmented each pass."""

    directory: str = ""
    """A directory with one sub-directory of images per class, as
    keras.utils.image_dataset_from_directory reads it (classes in sorted name order)."""
    files: str = ""
    """Or a glob of TFRecord files of tf.train.Example with `image/encoded` (JPEG/PNG bytes) and
    `image/class/label` (int64), the layout TensorFlow's own tooling writes."""
    image_size: tuple[int, ...] = (64, 64)
    """[height, width] every image is resized to (3 channels, float32 in [0, 1])."""
    num_examples: int = 0
    """TFRecords only: records in all files; 0 = count them once at start."""
    num_classes: int = 0
    """TFRecords only: 0 = the largest label + 1, found by the same count."""
    on_error: Literal["skip", "fail"] = "skip"
    """Directory only: an image that cannot be read (empty, truncated, not a JPEG or PNG, a
    broken link): "skip" leaves it out, counted, the first few named in the log and run.json;
    "fail" stops at once, naming the file."""


@dataclass(frozen=True)
class PythonDataConfig:
    """The user's own tf.data pipeline, which distagent shards, caches, shuffles, batches and
    prefetches like any other source."""

    factory: str = ""
    """"package.module:function" returning a tf.data.Dataset of unbatched (features, labels) or
    (features, labels, sample_weights) elements; features and labels may be a tensor, a tuple
    or a dict. A function with one argument gets this worker's tf.distribute.InputContext (and
    shards the data itself)."""
    validation_factory: str = ""
    """The same for the validation data (finite); empty: data.validation_fraction is held out
    of the factory's dataset."""


@dataclass(frozen=True)
class AugmentConfig:
    """Random augmentation of the images source, applied after the cache, new every pass."""

    flip: bool = True
    """Flip each image left-right with probability 1/2."""
    crop: float = 0.1
    """Cut up to this share of the height and width at a random place, resized back (0 = off)."""
    brightness: float = 0.1
    """Add a random brightness delta in [-brightness, brightness] (0 = off)."""


@dataclass(frozen=True)
class DataConfig:
    source: SourceKind = "synthetic"
    """Where examples come from; the source's options are in the table of the same name."""
    per_replica_batch_size: int = 32
    """Examples per replica per step; the global batch is this times the replicas."""
    shuffle_buffer: int = 10_000
    """Examples in the shuffle buffer (0 = no shuffle); reshuffled every pass."""
    cache: bool | str = True
    """Keep the decoded examples after the first pass: true in memory (where they fit), or a
    file path prefix (tf.data writes the cache there; for data bigger than memory)."""
    parallel_calls: Tunable = "autotune"
    """Parallel calls of the per-example map (and of file reads)."""
    prefetch: Tunable = "autotune"
    """Batches prepared ahead of the training step (0 = none)."""
    deterministic: bool = False
    """true keeps the element order fixed under parallelism (slower when elements vary in cost)."""
    autotune_ram_budget_mib: int = 0
    """RAM tf.data's autotuner may use for buffers; 0 = TensorFlow's default (half the RAM)."""
    optimize: bool = True
    """false builds the naive pipeline (sequential map, no cache, no prefetch) for comparison."""
    validation_fraction: float = 0.1
    """Share of the examples held out for the validation run."""
    read_latency_ms: float = 0.0
    """Storage latency per example read, any source (as a network filesystem or an object store
    adds): a wait that costs no CPU; parallel reads hide it, sequential ones pay it in full."""
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    tfrecord: TFRecordConfig = field(default_factory=TFRecordConfig)
    npz: NpzConfig = field(default_factory=NpzConfig)
    keras: KerasDataConfig = field(default_factory=KerasDataConfig)
    tfds: TfdsConfig = field(default_factory=TfdsConfig)
    images: ImagesConfig = field(default_factory=ImagesConfig)
    python: PythonDataConfig = field(default_factory=PythonDataConfig)
    augment: AugmentConfig = field(default_factory=AugmentConfig)


@dataclass(frozen=True)
class ModelConfig:
    name: str = "mlp"
    """A builtin ("mlp", "cnn", "resnet_small"), a keras.applications name ("ResNet50",
    "MobileNetV2", "EfficientNetB0", ...; weights=None) or "pkg.module:function" taking no
    argument, the data's element_spec, or (input_shape, num_classes), called in the strategy's
    scope; a model it compiled keeps its loss and metrics."""
    hidden_units: tuple[int, ...] = (128, 64)
    """Widths of the `mlp` builtin's hidden layers (wider: more compute per example)."""
    sync_batchnorm: bool = False
    """false: BatchNorm statistics per replica (Goyal et al.); true: synchronized across
    replicas."""


@dataclass(frozen=True)
class OptimizerConfig:
    name: OptimizerName = "sgd"
    """momentum is SGD with momentum 0.9."""
    base_learning_rate: float = 0.01
    """The rate tuned for base_batch_size; scaled to the global batch by `scaling`."""
    base_batch_size: int = 0
    """The batch the base rate was tuned for; 0 means per_replica_batch_size."""
    scaling: ScalingRule = "linear"
    """linear: base × global/base_batch; sqrt: base × sqrt(global/base_batch); none: base."""
    warmup_epochs: float = 0.0
    """Gradual warmup (Goyal et al.) from base to the scaled rate over this many epochs."""
    decay: DecayKind = "none"
    """Schedule after warmup, from the scaled rate over the remaining steps."""
    clip_norm: float = 0.0
    """>0: clip the gradients to this global L2 norm (of the all-reduced gradient); 0 = none."""


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 1
    """Passes of steps_per_epoch steps."""
    steps_per_epoch: int = 0
    """0 = one pass over the data; more steps than one pass repeats the data."""
    log_every_steps: int = 10
    """Write the training scalars every this many steps."""
    checkpoint_every_steps: int = 100
    """0 = checkpoint only at the end (and on SIGTERM)."""
    mixed_precision: bool = False
    """mixed_float16 compute with float32 variables."""
    jit_compile: bool = False
    """Compile the train step with XLA."""
    steps_per_execution: int = 1
    """Steps per compiled call (an inner loop, like Keras' steps_per_execution): fewer Python
    round trips for tiny steps; logging and checkpoint boundaries are never crossed."""
    stop_on_nan: bool = True
    """NaN or infinite loss stops the run with status `diverged` (false: on_divergence =
    "continue")."""
    on_divergence: DivergenceAction = "stop"
    """What a NaN or infinite loss (or gradient) does: stop (status `diverged`), rollback (restore
    the newest good checkpoint, scale the learning rate by recovery_lr_factor, skip the data
    that blew up, go on), or continue."""
    max_recoveries: int = 3
    """Rollbacks allowed per run; once spent, the next divergence ends it `diverged`."""
    recovery_lr_factor: float = 0.5
    """Each rollback multiplies the whole learning-rate schedule by this."""
    loss_upper_bound: float = 0.0
    """>0: a finite step loss above this counts as divergence too; 0 (the default): the bound is
    `loss_bound_factor` times the first logged loss (see there)."""
    loss_bound_factor: float = 1000.0
    """With loss_upper_bound 0: a step loss above this many times the first logged mean loss
    (its size, at least 1; after a resume, the first logged since) is a divergence: a loss that
    jumps to 6.6e10 and falls back is caught, not left for a finished run. 0 = no bound."""
    loss: str | tuple[tuple[str, str], ...] = ""
    """A Keras loss name ("mse", "binary_crossentropy", ...) or "package.module:function"
    (y_true, y_pred) -> per-example values; a table keyed by output name for a model with
    several outputs. Empty: the model's compiled loss, else the classifier's sparse
    categorical cross-entropy on logits."""
    metrics: tuple[str, ...] | tuple[tuple[str, str], ...] = ()
    """Per-example metric names ("accuracy", "mae", ...) or "package.module:function", for
    every output; or a table of one metric per output name. Empty: the model's compiled
    metrics, else accuracy for the classifier's loss."""
    histogram_every_steps: int = 0
    """>0: write each trainable variable's and gradient's histogram every this many steps
    (TensorBoard's histograms and distributions); 0 = off."""


@dataclass(frozen=True)
class ClusterConfig:
    workers: tuple[str, ...] = ()
    """host:port of every worker, for multi_worker without TF_CONFIG or Slurm."""
    timeout_seconds: float = 60.0
    """How long a worker waits for a lost peer before failing with a clear message."""
    hang_seconds: Literal["auto"] | float = "auto"
    """No step ended for this long: every worker writes its Python stacks into the run directory
    and its heartbeat says hung ("auto": the larger of 60 s and 10x the median step)."""
    on_hang: HangAction = "warn"
    """What a hang does then: "warn" (the job goes on waiting) or "abort" (every worker ends
    the job `hung`, keeping its last checkpoint)."""


@dataclass(frozen=True)
class TelemetryConfig:
    """The agent's system recorder: GPU and host samples into `system/` (per worker of a
    multi-worker job, `system/worker-<i>/`), which distmon shows for every host."""

    interval_seconds: float = 5.0
    """Seconds between samples."""
    simulate_gpus: int = 0
    """>0: record N simulated GPUs instead of NVML's (labelled simulated everywhere), for demos
    and tests on machines without GPUs."""
    peak_tflops: float = 0.0
    """>0: one device's peak TFLOP/s for MFU (a GPU, or a host for CPU replicas); 0 = the
    datasheet's for NVML's GPU model in the job's precision, or measured on CPU replicas."""


@dataclass(frozen=True)
class CostConfig:
    """What the job's GPU-hours and energy cost (USD), written to run.json's config: distmon
    shows the job's money from them where its own --price-gpu-hour / --price-kwh are absent."""

    price_gpu_hour: float = 0.0
    """USD per GPU-hour; 0 = none given."""
    price_kwh: float = 0.0
    """USD per kWh; 0 = none given."""


@dataclass(frozen=True)
class ProfileConfig:
    """TensorFlow profiles of the training steps, written under the run's `train/` where distmon
    reads them. Off unless asked for: with none of these set, no profiler is ever started."""

    steps: tuple[int, ...] = ()
    """[start, end]: profile the steps from start up to (not including) end; empty = none."""
    on_input_bound: bool = False
    """Profile once when the job turns highly input-bound (its own measured input wait)."""
    input_bound_steps: int = 10
    """Steps in the profile that on_input_bound takes."""
    interval_minutes: float = 30.0
    """on_input_bound profiles at most once per this many minutes."""


@dataclass(frozen=True)
class JobConfig:
    run: RunConfig = field(default_factory=RunConfig)
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    cost: CostConfig = field(default_factory=CostConfig)
    profile: ProfileConfig = field(default_factory=ProfileConfig)
