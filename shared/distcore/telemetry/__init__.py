"""GPU and host telemetry: NVML (or simulated) GPUs and psutil host samples, a fixed-rate
sampler with ring-buffer history, JSON for `distmon --once --json`, and a recorder that writes
samples as TensorBoard scalars. Free of tensorflow and textual at import time."""

from __future__ import annotations

from distcore.telemetry.model import (
    GpuDevice,
    GpuProcess,
    GpuSource,
    GpuStatus,
    HostSample,
    ProcessSample,
    Source,
    StatusKind,
    TelemetrySnapshot,
)
from distcore.telemetry.source import DisabledGpuSource, TelemetrySource, make_source

__all__ = [
    "DisabledGpuSource",
    "GpuDevice",
    "GpuProcess",
    "GpuSource",
    "GpuStatus",
    "HostSample",
    "ProcessSample",
    "Source",
    "StatusKind",
    "TelemetrySnapshot",
    "TelemetrySource",
    "make_source",
]
