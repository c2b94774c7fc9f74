"""The immutable values telemetry hands out: a snapshot per tick, None wherever a value is unknown.

A field NVML does not support, a MIG slice's N/A, or a process that vanished mid-read are all
`None`: a renderer shows "n/a", never a zero that reads like an idle GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

# Why GPUs are (not) shown, for code that must react (alerts, styling); `reason` is for people.
StatusKind = Literal[
    "ok",  # every GPU answered
    "degraded",  # some GPUs answered, others are lost or unreadable
    "simulated",  # --simulate-gpus
    "disabled",  # --no-gpu
    "no_library",  # NVML library not found: no NVIDIA driver installed
    "no_driver",  # library present, kernel driver not loaded
    "no_devices",  # NVML works and finds no GPU
    "no_permission",
    "gpu_lost",  # every GPU fell off the bus / needs a reset
    "error",  # anything else (reason has NVML's words)
]


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU; name and command line come from psutil (None if hidden)."""

    pid: int
    used_memory_mib: float | None
    name: str | None
    cmdline: str | None


@dataclass(frozen=True)
class GpuDevice:
    """One GPU as NVML reported it at one instant.

    `error` is set when the device as a whole could not be read (lost, no handle): the other
    fields then hold whatever was read before the failure, usually nothing.
    """

    index: int
    name: str | None
    uuid: str | None
    utilization_gpu: float | None
    utilization_memory: float | None
    memory_used_mib: float | None
    memory_total_mib: float | None
    temperature_c: float | None
    power_w: float | None
    power_limit_w: float | None
    sm_clock_mhz: float | None
    fan_percent: float | None
    pcie_rx_kib_s: float | None
    pcie_tx_kib_s: float | None
    processes: tuple[GpuProcess, ...]
    error: str | None = None
    # NVML GPM (telemetry/gpm.py), percent over the interval since the last sample; None
    # before Hopper, on the first sample, and wherever GPM is not read.
    sm_activity: float | None = None
    """Share of SMs busy (GPM SM_UTIL): low while util% is high is a GPU busy but idle."""
    sm_occupancy: float | None = None
    """Resident warps over the SMs' maximum (GPM SM_OCCUPANCY)."""
    tensor_activity: float | None = None
    """Cycles any tensor core issued (GPM ANY_TENSOR_UTIL)."""
    dram_bandwidth: float | None = None
    """Share of the DRAM's peak bandwidth used (GPM DRAM_BW_UTIL)."""
    energy_joules: float | None = None
    """NVML's energy counter (joules since the driver loaded; Volta and newer, else None)."""


@dataclass(frozen=True)
class GpuStatus:
    """Whether GPUs can be shown at all, and in words why not (or what is partly wrong)."""

    available: bool
    reason: str | None
    simulated: bool = False
    kind: StatusKind = "ok"
    gpm_reason: str | None = None
    """Why some or all GPUs have no GPM activity counters, once (None: all have them)."""


@dataclass(frozen=True)
class ProcessSample:
    """CPU and memory of one watched process (a training process, its input pipeline).

    cpu_percent is per `top`: 100 is one full core. It is None on the first sight of a process
    (psutil needs two readings) and when the process is gone or hidden (`error` says which).
    """

    pid: int
    name: str | None
    cpu_percent: float | None
    rss_mib: float | None
    error: str | None = None


@dataclass(frozen=True)
class HostSample:
    cpu_percent: float
    per_core: tuple[float, ...]
    load_avg: tuple[float, float, float] | None
    memory_used_mib: float
    memory_total_mib: float
    processes: tuple[ProcessSample, ...] = ()
    energy_joules: float | None = None  # RAPL's CPU packages, where readable (telemetry.rapl)


@dataclass(frozen=True)
class TelemetrySnapshot:
    """Everything sampled in one tick; `time` is wall-clock (unix seconds)."""

    time: float
    status: GpuStatus
    devices: tuple[GpuDevice, ...]
    host: HostSample | None


class GpuSource(Protocol):
    """Reads all GPUs once; never raises for a missing or failing GPU (that is a status)."""

    def read(self) -> tuple[GpuStatus, tuple[GpuDevice, ...]]: ...

    def close(self) -> None: ...


class Source(Protocol):
    """What the sampler and the recorder pull from: one snapshot per call."""

    def sample(self) -> TelemetrySnapshot: ...

    def close(self) -> None: ...
