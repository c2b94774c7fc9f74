"""A fake `pynvml` module for tests: the real module's constants and error classes, fake GPUs.

Only the device functions distcore.telemetry calls are faked; anything else is looked up on the
real pynvml (constants, `NVMLError_*` classes), so errors are raised exactly as pynvml raises
them: `pynvml.NVMLError(code)` returns the matching subclass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml

GIB = 1024**3
MIB = 1024**2


@dataclass
class FakeGpu:
    """One GPU. `errors` maps an nvml function name to the NVML_ERROR_* code it raises;
    `lost` makes every call raise GPU_IS_LOST (a GPU that fell off the bus)."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-11111111-2222-3333-4444-555555555555"
    util_gpu: int = 87
    util_memory: int = 41
    memory_used: int = 30 * GIB
    memory_total: int = 80 * GIB
    temperature: int = 63
    power_mw: int = 412_500
    power_limit_mw: int = 700_000
    sm_clock: int = 1980
    fan: int = 45
    pcie_rx: int = 52_000
    pcie_tx: int = 9_000
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    lost: bool = False
    handle_error: int | None = None


class FakeNvml:
    """Stands in for the pynvml module; inject it as `NvmlGpuSource(nvml=FakeNvml(...))`."""

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        *,
        init_error: int | None = None,
        count_error: int | None = None,
        missing: frozenset[str] = frozenset(),
    ) -> None:
        self.missing = missing  # functions this "older nvidia-ml-py" lacks
        self.gpus = gpus if gpus is not None else [FakeGpu()]
        self.init_error = init_error
        self.count_error = count_error
        self.init_calls = 0
        self.shutdown_calls = 0
        self.initialised = False

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml") and name in object.__getattribute__(self, "missing"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        # Constants and error classes come from the real module; unknown nvml functions are
        # absent, as in an older nvidia-ml-py.
        if name.startswith(("NVML_", "NVMLError")):
            return getattr(pynvml, name)
        raise AttributeError(name)

    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self._check_init()
        self.shutdown_calls += 1
        self.initialised = False

    def _check_init(self) -> None:
        if not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    def nvmlDeviceGetCount(self) -> int:
        self._check_init()
        if self.count_error is not None:
            raise pynvml.NVMLError(self.count_error)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        self._check_init()
        gpu = self.gpus[index]
        if gpu.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if gpu.handle_error is not None:
            raise pynvml.NVMLError(gpu.handle_error)
        return gpu

    def _answer(self, gpu: FakeGpu, function: str, value: Any) -> Any:
        self._check_init()
        if gpu.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if function in gpu.errors:
            raise pynvml.NVMLError(gpu.errors[function])
        return value

    def nvmlDeviceGetName(self, gpu: FakeGpu) -> str:
        return str(self._answer(gpu, "nvmlDeviceGetName", gpu.name))

    def nvmlDeviceGetUUID(self, gpu: FakeGpu) -> str:
        return str(self._answer(gpu, "nvmlDeviceGetUUID", gpu.uuid))

    def nvmlDeviceGetUtilizationRates(self, gpu: FakeGpu) -> Any:
        rates = SimpleNamespace(gpu=gpu.util_gpu, memory=gpu.util_memory)
        return self._answer(gpu, "nvmlDeviceGetUtilizationRates", rates)

    def nvmlDeviceGetMemoryInfo(self, gpu: FakeGpu) -> Any:
        free = gpu.memory_total - gpu.memory_used
        info = SimpleNamespace(total=gpu.memory_total, used=gpu.memory_used, free=free)
        return self._answer(gpu, "nvmlDeviceGetMemoryInfo", info)

    def nvmlDeviceGetTemperature(self, gpu: FakeGpu, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return int(self._answer(gpu, "nvmlDeviceGetTemperature", gpu.temperature))

    def nvmlDeviceGetPowerUsage(self, gpu: FakeGpu) -> int:
        return int(self._answer(gpu, "nvmlDeviceGetPowerUsage", gpu.power_mw))

    def nvmlDeviceGetEnforcedPowerLimit(self, gpu: FakeGpu) -> int:
        return int(self._answer(gpu, "nvmlDeviceGetEnforcedPowerLimit", gpu.power_limit_mw))

    def nvmlDeviceGetClockInfo(self, gpu: FakeGpu, clock: int) -> int:
        assert clock == pynvml.NVML_CLOCK_SM
        return int(self._answer(gpu, "nvmlDeviceGetClockInfo", gpu.sm_clock))

    def nvmlDeviceGetFanSpeed(self, gpu: FakeGpu) -> int:
        return int(self._answer(gpu, "nvmlDeviceGetFanSpeed", gpu.fan))

    def nvmlDeviceGetPcieThroughput(self, gpu: FakeGpu, counter: int) -> int:
        value = gpu.pcie_rx if counter == pynvml.NVML_PCIE_UTIL_RX_BYTES else gpu.pcie_tx
        return int(self._answer(gpu, "nvmlDeviceGetPcieThroughput", value))

    def nvmlDeviceGetComputeRunningProcesses(self, gpu: FakeGpu) -> list[Any]:
        procs = [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in gpu.processes]
        return list(self._answer(gpu, "nvmlDeviceGetComputeRunningProcesses", procs))
