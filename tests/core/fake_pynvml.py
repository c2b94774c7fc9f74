"""A fake `pynvml` module for tests: the real module's constants and error classes, fake GPUs.

Only the device functions distcore.telemetry calls are faked; anything else is looked up on the
real pynvml (constants, `NVMLError_*` classes, the `c_nvmlGpm*` ctypes structures), so errors
are raised exactly as pynvml raises them: `pynvml.NVMLError(code)` returns the matching
subclass.

GPM as NVML does it: `nvmlGpmQueryDeviceSupport` fills a real `c_nvmlGpmSupport_t` (supported
from Hopper on), `nvmlGpmSampleAlloc` hands out a real `c_nvmlGpmSample_t` pointer,
`nvmlGpmSampleGet` raises NVML_ERROR_NOT_SUPPORTED before Hopper, and `nvmlGpmMetricsGet`
reads a real `c_nvmlGpmMetricsGet_t` (its version checked, both samples from one GPU), answering
each metric with its own nvmlReturn.
"""

from __future__ import annotations

import ctypes
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
    energy_mj: int = 3_600_000_000  # since the driver loaded; a test moves it on
    sm_clock: int = 1980
    fan: int = 45
    pcie_rx: int = 52_000
    pcie_tx: int = 9_000
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    lost: bool = False
    handle_error: int | None = None
    architecture: int = pynvml.NVML_DEVICE_ARCH_HOPPER
    gpm: dict[int, float] = field(default_factory=lambda: {
        pynvml.NVML_GPM_METRIC_SM_UTIL: 71.5,
        pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: 38.25,
        pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 42.0,
        pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 55.5,
    })
    """GPM metric id -> the percentage the next interval reads (a metric absent answers its
    own NVML_ERROR_NOT_SUPPORTED)."""

    @property
    def has_gpm(self) -> bool:
        return self.architecture >= pynvml.NVML_DEVICE_ARCH_HOPPER


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
        # A sample buffer's address -> (its struct, kept alive, and the GPU and values it holds).
        self.gpm_samples: dict[int, tuple[Any, tuple[FakeGpu, dict[int, float]] | None]] = {}
        self.gpm_freed = 0

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml") and name in object.__getattribute__(self, "missing"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        # Constants and error classes come from the real module; unknown nvml functions are
        # absent, as in an older nvidia-ml-py.
        if name.startswith(("NVML_", "NVMLError", "c_nvmlGpm")):
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

    def nvmlDeviceGetTotalEnergyConsumption(self, gpu: FakeGpu) -> int:
        """Millijoules since the driver loaded; before Volta NVML answers NOT_SUPPORTED."""
        if gpu.architecture < pynvml.NVML_DEVICE_ARCH_VOLTA:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(self._answer(gpu, "nvmlDeviceGetTotalEnergyConsumption", gpu.energy_mj))

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

    # GPM: NVML's own structures, filled and read as the C library does.

    def nvmlGpmQueryDeviceSupport(self, gpu: FakeGpu) -> Any:
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = int(gpu.has_gpm)
        return self._answer(gpu, "nvmlGpmQueryDeviceSupport", support)

    def nvmlGpmSampleAlloc(self) -> Any:
        self._check_init()
        struct = pynvml.struct_c_nvmlGpmSample_t()
        sample = pynvml.c_nvmlGpmSample_t(struct)
        self.gpm_samples[ctypes.addressof(struct)] = (struct, None)
        return sample

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        self._check_init()
        if self.gpm_samples.pop(self._address(sample), None) is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        self.gpm_freed += 1

    def nvmlGpmSampleGet(self, gpu: FakeGpu, sample: Any) -> Any:
        self._answer(gpu, "nvmlGpmSampleGet", None)
        if not gpu.has_gpm:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        address = self._address(sample)
        if address not in self.gpm_samples:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        self.gpm_samples[address] = (self.gpm_samples[address][0], (gpu, dict(gpu.gpm)))
        return sample

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        self._check_init()
        if request.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        first = self.gpm_samples.get(self._address(request.sample1), (None, None))[1]
        second = self.gpm_samples.get(self._address(request.sample2), (None, None))[1]
        if first is None or second is None or first[0] is not second[0] \
                or not 0 < request.numMetrics <= pynvml.NVML_GPM_METRIC_MAX:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        for slot in range(request.numMetrics):
            metric = request.metrics[slot]
            value = second[1].get(metric.metricId)
            metric.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED if value is None \
                else pynvml.NVML_SUCCESS
            metric.value = 0.0 if value is None else value
        return request

    @staticmethod
    def _address(sample: Any) -> int:
        return ctypes.addressof(sample.contents) if sample else 0
