"""Model FLOPs from TensorFlow's own cost accounting, and a measured peak for CPU replicas.

The forward pass of one example is traced once (a concrete function of `model(x)` for a batch
of 1, nothing run) and TensorFlow's profiler sums the `flops` statistic its op registry gives
each op of that graph (MatMul 2·M·N·K, Conv2D 2·outputs·kernel·channels, BiasAdd, pooling, ...):
the same numbers for a builtin, a keras.applications network or a user's model, with no
per-model formula. The training step follows PaLM's convention (Appendix B): the backward pass
costs twice the forward, so a step is 3 × forward × global batch, whatever the hardware ran
(recomputation, the optimizer's update and padding are not model FLOPs).

A CPU has no datasheet figure that a replica on it could reach, so the agent measures one: a
float32 (or, under mixed precision, float16) matrix multiply timed on this host, kept per host
with its date (distagent.cpu_peak); the result is named "measured" wherever it is shown. CPU
replicas share their host's cores: the job's peak counts each host once, however many of its
workers run there (launch-local runs them all on one).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from distagent.cpu_peak import PROBE_RUNS, CpuPeak, host_peak
from distagent.plan import Plan, with_flops, with_peak
from distagent.schema import JobConfig
from distcore.telemetry.peaks import (
    Peak,
    configured_peak,
    datasheet_peak,
    job_dtype,
    measured_peak,
    si_rate,
)


def forward_flops(model: Any, features: Any) -> float | None:
    """FLOPs of one example's forward pass as TensorFlow counts them; None when it counts
    nothing (a graph of ops it has no statistic for: unknown, not zero). `features`: one
    example's features as the data's element_spec has them (a TensorSpec, a tuple or a dict of
    them), or an input shape (float32)."""
    import tensorflow as tf
    from tensorflow.python.profiler import option_builder
    from tensorflow.python.util import deprecation

    if isinstance(features, list | tuple) and all(isinstance(d, int) for d in features):
        features = tf.TensorSpec(tuple(features), tf.float32)
    if not all(s.shape.is_fully_defined() for s in tf.nest.flatten(features)):
        return None  # a length known only per batch: no one count per example
    spec = tf.nest.map_structure(lambda s: tf.TensorSpec((1, *s.shape), s.dtype), features)
    graph = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec).graph
    options = option_builder.ProfileOptionBuilder.float_operation()
    options["output"] = "none"  # the profiler otherwise prints its table to stdout
    with deprecation.silence():  # the v1 profiler's notices are not the user's to act on
        total = tf.compat.v1.profiler.profile(graph, options=options).total_float_ops
    return float(total) if total > 0 else None


@functools.lru_cache(maxsize=2)
def measure_cpu_peak(*, mixed_precision: bool = False) -> CpuPeak:
    """FLOP/s of this host's CPU on a dense matrix multiply (distagent.cpu_peak: warmed, the
    median of several runs, kept per host with its date): what the CPU replicas of this
    process share. Asked once per process and precision."""
    import tensorflow as tf

    return host_peak(tf, tf.float16 if mixed_precision else tf.float32)


def device_peak(
    *, on_gpu: bool, mixed_precision: bool, peak_tflops: float = 0.0,
    gpu_name: Callable[[], str | None] | None = None,
) -> tuple[Peak | None, str | None]:
    """One device's peak FLOP/s and, when there is none, the warning that says why: the
    config's figure; else on GPUs the datasheet row for NVML's device name in the job's
    precision; else (CPU replicas) a measured matrix multiply on this host."""
    if peak_tflops > 0:
        return configured_peak(peak_tflops), None
    if not on_gpu:
        host = measure_cpu_peak(mixed_precision=mixed_precision)
        what = (f"{'float16' if mixed_precision else 'float32'} matmul on this CPU, median of "
                f"{PROBE_RUNS} runs on {host.measured_on.isoformat()}")
        return measured_peak(host.flops_per_second, what), None
    import tensorflow as tf

    name = (gpu_name or nvml_gpu_name)()
    tf32 = bool(tf.config.experimental.tensor_float_32_execution_enabled())
    dtype = job_dtype(mixed_precision, tf32)
    peak = datasheet_peak(name, dtype) if name is not None else None
    if peak is not None:
        return peak, None
    which = "NVML names no GPU" if name is None else f"no datasheet peak for {name} in {dtype}"
    return None, f"{which}: set telemetry.peak_tflops (per GPU) for MFU"


def nvml_gpu_name() -> str | None:
    """The first GPU's name as NVML reports it (None without NVML or a GPU)."""
    from distcore.telemetry.nvml import NvmlGpuSource

    source = NvmlGpuSource(pcie=False)
    try:
        _, devices = source.read()
    finally:
        source.close()
    return next((d.name for d in devices if d.name), None)


def counted_plan(cfg: JobConfig, plan: Plan, forward: float | None,
                 hosts: int = 1) -> tuple[Plan, list[str]]:  # fmt: skip
    """The plan with the model's FLOPs and its devices' peak, and the warnings that say what
    is unknown (no MFU then, never a made-up one). `hosts`: the machines its workers run on."""
    warnings = [] if forward is not None else [
        "TensorFlow counts no FLOPs in this model's forward pass: no MFU"]
    on_gpu = any("GPU" in d.upper() for d in plan.devices)
    peak, why = device_peak(on_gpu=on_gpu, mixed_precision=cfg.train.mixed_precision,
                            peak_tflops=cfg.telemetry.peak_tflops)
    if why is not None:
        warnings.append(why)
    # CPU replicas are logical devices of one host's cores: the host is the device, counted
    # once however many workers share it.
    devices = plan.replicas if on_gpu else max(1, min(hosts, plan.workers))
    plan = with_flops(plan, forward)
    plan = with_peak(plan, peak.flops_per_second if peak else None,
                     peak.source if peak else None, devices)
    return plan, warnings


def model_forward_flops(model: Any, features: Any) -> float | None:
    """forward_flops, or None when tracing the model this way fails (a user's model that
    cannot be called outside a replica): the job trains, without MFU."""
    try:
        return forward_flops(model, features)
    except (ValueError, TypeError, NotImplementedError, RuntimeError):
        return None


def flops_text(plan: Plan) -> str:
    """`FLOPs per step 3.60e+07, per example 6.56e+05 (TensorFlow's count of the forward pass
    × 3)`, or why there is none."""
    if plan.flops_per_step is None or plan.flops_per_example is None:
        return "not counted (TensorFlow counts no FLOPs in this model): no MFU"
    return (f"FLOPs per step {plan.flops_per_step:.3e}, per example "
            f"{plan.flops_per_example:.3e} (TensorFlow's count of the forward pass × 3)")


def peak_text(plan: Plan) -> str:
    if plan.peak_flops_per_second is None:
        return "unknown: set telemetry.peak_tflops for MFU"
    each = plan.peak_flops_per_second / max(1, plan.peak_devices)
    return (f"{si_rate(plan.peak_flops_per_second)} = {plan.peak_devices} × "
            f"{si_rate(each)}, {plan.peak_source}")
