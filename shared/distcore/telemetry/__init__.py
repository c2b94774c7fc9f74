"""GPU and host telemetry: NVML (or simulated) GPUs and psutil host samples, a fixed-rate
sampler with ring-buffer history, JSON for `distmon --once --json`, and a recorder that writes
samples as TensorBoard scalars. Free of tensorflow and textual at import time.

The names below load lazily, as distcore.events's do: `import distcore.telemetry.samples` (the
snapshot types the jobs and the front ends name) costs the standard library only; psutil and
NVML come with the sources that use them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from distcore.lazy import lazy_names

if TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from distcore.telemetry.samples import (
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

_LAZY = {
    "DisabledGpuSource": "source",
    "GpuDevice": "samples",
    "GpuProcess": "samples",
    "GpuSource": "samples",
    "GpuStatus": "samples",
    "HostSample": "samples",
    "ProcessSample": "samples",
    "Source": "samples",
    "StatusKind": "samples",
    "TelemetrySnapshot": "samples",
    "TelemetrySource": "source",
    "make_source": "source",
}

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


__getattr__ = lazy_names(__name__, _LAZY)
