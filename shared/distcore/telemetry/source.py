"""One source = the GPUs (NVML, simulated or disabled) plus the host, sampled together."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from distcore.telemetry.host import PsutilHostReader
from distcore.telemetry.samples import GpuDevice, GpuSource, GpuStatus, TelemetrySnapshot

NO_GPU_REASON = "GPU sampling disabled (--no-gpu)"


class DisabledGpuSource:
    """No GPU queries at all: the user asked for none."""

    def __init__(self, reason: str = NO_GPU_REASON) -> None:
        self._reason = reason

    def read(self) -> tuple[GpuStatus, tuple[GpuDevice, ...]]:
        return GpuStatus(False, self._reason, False, "disabled"), ()

    def close(self) -> None:
        pass


class TelemetrySource:
    """Samples GPUs and host in one call; `clock` stamps the snapshot (wall time)."""

    def __init__(
        self,
        gpus: GpuSource,
        host: PsutilHostReader | None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.gpus = gpus
        self.host = host
        self._clock = clock

    def sample(self) -> TelemetrySnapshot:
        status, devices = self.gpus.read()
        host = self.host.sample() if self.host is not None else None
        return TelemetrySnapshot(self._clock(), status, devices, host)

    def close(self) -> None:
        self.gpus.close()
        if self.host is not None:
            self.host.close()


def make_source(
    *,
    no_gpu: bool = False,
    simulate_gpus: int = 0,
    pids: Sequence[int] = (),
    host: bool = True,
    nvml: Any = None,
) -> TelemetrySource:
    """The source the flags ask for: simulated GPUs if `simulate_gpus` > 0 (NVML untouched),
    none with `no_gpu`, else NVML (`nvml` injects a pynvml-like module).

    Each kind's module is imported only when asked for: `--no-gpu` loads nothing of NVML
    (neither distcore.telemetry.nvml nor pynvml) and no simulated devices
    (tests/test_startup_imports.py checks it in a fresh interpreter)."""
    gpus: GpuSource
    if simulate_gpus > 0:
        from distcore.telemetry.simulated import SimulatedGpuSource

        gpus = SimulatedGpuSource(simulate_gpus)
    elif no_gpu:
        gpus = DisabledGpuSource()
    else:
        from distcore.telemetry.nvml import NvmlGpuSource

        gpus = NvmlGpuSource(nvml)
    return TelemetrySource(gpus, PsutilHostReader(pids) if host else None)
