"""The rules over the GPUs: unevenly used, memory full, and idle while a run's steps advance.

`where` names a host other than this machine in the message (" on gpu7"), and `host` is the
host an alert is about (part of its key): two hosts' imbalances are two alerts.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Final

from distcore import names
from distcore.alerts import Alert, GpuLike, RunLike
from distcore.alerts.cadence import is_advancing, usual_interval
from distcore.alerts.series import REMEDY, loss_tag

# Thresholds beyond the TF profiler's bands (those live in distcore.names).
LOW_GPU_UTILIZATION: Final = 30.0  # % below which a busy job's GPUs look starved
IMBALANCE_SPREAD: Final = 30.0  # max - min utilization (points of %) across a job's GPUs
MEMORY_FULL_FRACTION: Final = 0.95


def input_bound_suspected(
    runs: Sequence[RunLike],
    gpus: Sequence[GpuLike],
    now: float,
    intervals: Mapping[str, float | None] | None = None,
) -> list[Alert]:
    """For writers that do not measure input wait: idle GPUs while a run's steps advance."""
    utils = [g.utilization_gpu for g in gpus if g.utilization_gpu is not None]
    if not utils:
        return []
    mean = statistics.fmean(utils)
    if mean >= LOW_GPU_UTILIZATION:
        return []
    message = (
        f"GPU utilization {mean:.0f}% while steps advance: input-bound suspected. "
        f"Recommendation: {REMEDY}."
    )
    cadence = intervals if intervals is not None else {r.name: usual_interval(r) for r in runs}
    return [
        Alert("input_bound_suspected", "warning", run.name, message, now)
        for run in runs
        if names.INPUT_WAIT_FRACTION not in run.scalars
        and loss_tag(run.scalars) is not None
        and is_advancing(run, now, cadence.get(run.name))
    ]


def gpu_imbalance(
    gpus: Sequence[GpuLike], now: float, where: str = "", host: str | None = None
) -> Alert | None:
    """`where`: the host's name for GPUs other than this machine's (" on gpu7"); `host`: the
    host the alert is about (its key)."""
    utils = {g.index: g.utilization_gpu for g in gpus if g.utilization_gpu is not None}
    if len(utils) < 2:
        return None
    spread = max(utils.values()) - min(utils.values())
    if spread <= IMBALANCE_SPREAD:
        return None
    busiest = max(utils, key=lambda i: utils[i])
    idlest = min(utils, key=lambda i: utils[i])
    message = (
        f"GPUs{where} unevenly used: GPU {busiest} at {utils[busiest]:.0f}%, "
        f"GPU {idlest} at {utils[idlest]:.0f}% (spread {spread:.0f} points)"
    )
    return Alert("gpu_imbalance", "warning", None, message, now, host=host)


def gpu_memory_full(
    gpu: GpuLike, now: float, where: str = "", host: str | None = None
) -> Alert | None:
    used, total = gpu.memory_used_mib, gpu.memory_total_mib
    if used is None or not total:
        return None
    fraction = used / total
    if fraction < MEMORY_FULL_FRACTION:
        return None
    gib = f"{used / 1024:.1f}/{total / 1024:.1f} GiB"
    message = f"GPU {gpu.index}{where} memory {fraction:.0%} full ({gib})"
    return Alert("gpu_memory_full", "warning", None, message, now, host=host, gpu=gpu.index)


def gpu_alerts(
    gpus: Sequence[GpuLike], now: float, where: str = "", host: str | None = None
) -> list[Alert]:
    found = [gpu_imbalance(gpus, now, where, host),
             *(gpu_memory_full(g, now, where, host) for g in gpus)]  # fmt: skip
    return [a for a in found if a is not None]
