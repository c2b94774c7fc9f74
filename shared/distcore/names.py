"""The metric names, run layout and thresholds that the agent writes and the dashboard reads.

Both sides import these constants so that a renamed tag cannot silently break the dashboard.
"""

from __future__ import annotations

from typing import Final

# Training scalars, written every `log_every_steps` at the global step (train/ and validation/).
LOSS: Final = "loss"
ACCURACY: Final = "accuracy"
LEARNING_RATE: Final = "learning_rate"
EXAMPLES_PER_SECOND: Final = "perf/examples_per_second"
STEP_TIME_MS: Final = "perf/step_time_ms"
INPUT_WAIT_MS: Final = "perf/input_wait_ms"
INPUT_WAIT_FRACTION: Final = "perf/input_wait_fraction"
STEP_COMPUTE_SECONDS: Final = "perf/step_compute_seconds"
"""Per step, this worker's time to its gradients (input, forward, backward)."""
REDUCE_WAIT_SECONDS: Final = "perf/reduce_wait_seconds"
"""Per step, this worker's time in the gradient's cross-replica reduction (waiting for peers)."""
GRAD_NORM: Final = "perf/grad_norm"
"""Global L2 norm of the last step's all-reduced gradient, before clipping."""
MODEL_FLOPS_PER_SECOND: Final = "perf/model_flops_per_second"
"""Model FLOPs (3 × the forward pass's, TensorFlow's count) over the interval's wall time."""
MFU: Final = "perf/mfu"
"""Model FLOPs utilisation: model_flops_per_second over the replicas' peak (0-1)."""
GOODPUT: Final = "goodput"
"""The comparison table's column of a job's ledger: its compute over its wall time."""
RECOVERIES: Final = "health/recoveries"
"""Written at the diverged step when a run rolls back: how many recoveries so far."""
# Written at each epoch's end, as Keras' TensorBoard callback names them.
EPOCH_LOSS: Final = "epoch_loss"
EPOCH_ACCURACY: Final = "epoch_accuracy"

TRAINING_TAGS: Final = (
    LOSS,
    ACCURACY,
    LEARNING_RATE,
    EXAMPLES_PER_SECOND,
    STEP_TIME_MS,
    INPUT_WAIT_MS,
    INPUT_WAIT_FRACTION,
)
EPOCH_TAGS: Final = (EPOCH_LOSS, EPOCH_ACCURACY)

# System samples, written by distcore.telemetry's recorder into the `system` sub-run.
HOST_CPU_PERCENT: Final = "host/cpu_percent"
HOST_MEMORY_USED_MIB: Final = "host/memory_used_mib"
GPU_FIELDS: Final = ("utilization", "memory_used_mib", "power_w", "temperature_c")
GPM_FIELDS: Final = ("sm_activity", "sm_occupancy", "tensor_activity", "dram_bandwidth")
"""NVML GPM's activity counters (percent; Hopper and newer), written where the GPU has them."""
GPU_ENERGY: Final = "energy_joules"
"""A GPU's energy counter (NVML's total since the driver loaded, Volta and newer), where read:
a job's energy is its last point less its first (distcore.jobs.cost)."""
HOST_ENERGY_JOULES: Final = "host/energy_joules"
"""The host's CPU packages' energy (RAPL), where readable: a CPU host's share of a job's energy."""


def gpu_tag(index: int, field: str) -> str:
    """`gpu/<index>/<field>`, e.g. gpu/0/utilization."""
    if field not in GPU_FIELDS and field not in GPM_FIELDS and field != GPU_ENERGY:
        raise ValueError(f"unknown GPU field {field!r}; expected one of "
                         f"{(*GPU_FIELDS, *GPM_FIELDS, GPU_ENERGY)}")
    return f"gpu/{index}/{field}"


# Run directory layout: <logdir>/<run name>/{train,validation,system,checkpoints,run.json}.
TRAIN_DIR: Final = "train"
VALIDATION_DIR: Final = "validation"
SYSTEM_DIR: Final = "system"
CHECKPOINT_DIR: Final = "checkpoints"
RUN_JSON: Final = "run.json"


def worker_system_dir(task_index: int) -> str:
    """Each multi-worker task writes its own samples to system/worker-<i>/."""
    return f"{SYSTEM_DIR}/worker-{task_index}"


# run.json status values.
STATUS_RUNNING: Final = "running"
STATUS_FINISHED: Final = "finished"
STATUS_FAILED: Final = "failed"
STATUS_DIVERGED: Final = "diverged"
STATUS_STOPPED: Final = "stopped"
STATUS_HUNG: Final = "hung"
"""Ended by `cluster.on_hang = "abort"`: no step ended for `cluster.hang_seconds`."""
STATUS_DIED: Final = "died"
"""Shown, never written: run.json says running but its process on this machine is gone."""
RUN_STATUSES: Final = (
    STATUS_RUNNING, STATUS_FINISHED, STATUS_FAILED, STATUS_DIVERGED, STATUS_STOPPED, STATUS_HUNG
)


def heartbeat_name(worker: int) -> str:
    """Each worker's heartbeat in the run directory; the chief copies all into run.json's
    `workers`."""
    return f"heartbeat-worker-{worker}.json"


def stacks_name(worker: int) -> str:
    """A worker's Python stacks, written when it finds the job hung."""
    return f"stacks-worker-{worker}.txt"

# The TF profiler's input-bound bands for input_wait_fraction = input time / step time.
INPUT_WAIT_MODERATE: Final = 0.05  # 5-20%: moderately input-bound
INPUT_WAIT_HIGH: Final = 0.20  # 20% or more: highly input-bound
