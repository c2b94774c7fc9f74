"""GPU sampling through NVML (`nvidia-ml-py`, imported as `pynvml`).

NVML is initialised lazily under a lock on the first read and shut down by `close()` (or at
interpreter exit). Every failure becomes data: a missing library or driver is a `GpuStatus` with
a one-line reason, a lost GPU is a device with `error` set, an unsupported field (or MIG's N/A)
is `None`. The `nvml` module is injected so tests can hand in a fake that raises the real
`pynvml.NVMLError_*` classes.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import psutil

from distcore.telemetry.gpm import FIRST_INTERVAL_S, GpmReader, combined_reason
from distcore.telemetry.samples import GpuDevice, GpuProcess, GpuStatus, StatusKind
from distcore.wording import counted

MIB = 1024 * 1024
# NVML's "value not available" sentinels (NVML_VALUE_NOT_AVAILABLE for uint / ulonglong).
_NOT_AVAILABLE = frozenset({0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF})

# Error codes (pynvml.NVML_ERROR_*) as a status kind and words for a person; the rest are
# kind "error" with NVML's own string.
_REASONS: dict[str, tuple[StatusKind, str]] = {
    "NVML_ERROR_LIBRARY_NOT_FOUND": (
        "no_library", "NVML library not found — no NVIDIA driver on this host"
    ),
    "NVML_ERROR_DRIVER_NOT_LOADED": (
        "no_driver", "NVIDIA driver not loaded — is the kernel module installed?"
    ),
    "NVML_ERROR_NO_PERMISSION": (
        "no_permission", "no permission to query the GPUs — check access to /dev/nvidia*"
    ),
    "NVML_ERROR_GPU_IS_LOST": (
        "gpu_lost", "GPU is lost — it stopped responding; the host needs a GPU reset"
    ),
    "NVML_ERROR_RESET_REQUIRED": ("gpu_lost", "GPU needs a reset before it can be used again"),
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": (
        "error", "NVML and kernel driver versions differ — reboot after the driver update"
    ),
    "NVML_ERROR_UNINITIALIZED": ("error", "NVML is not initialised"),
    "NVML_ERROR_TIMEOUT": ("error", "NVML timed out"),
}
# Errors after which a device answers nothing more this tick: stop asking it.
_DEVICE_FATAL = ("NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_RESET_REQUIRED", "NVML_ERROR_UNINITIALIZED")


def nvml_failure(nvml: Any, err: BaseException) -> tuple[StatusKind, str]:
    """The status kind and one-line, human reason for an NVML error."""
    value = getattr(err, "value", None)
    for const, failure in _REASONS.items():
        if value is not None and value == getattr(nvml, const, object()):
            return failure
    return "error", f"NVML error: {err}"


def failed(kind: StatusKind, reason: str) -> GpuStatus:
    return GpuStatus(False, reason, False, kind)


def _is_fatal(nvml: Any, err: BaseException) -> bool:
    value = getattr(err, "value", None)
    return value is not None and any(value == getattr(nvml, c, object()) for c in _DEVICE_FATAL)


def _known(value: Any) -> float | None:
    """NVML's N/A sentinels and non-numbers are unknown."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return None if value in _NOT_AVAILABLE else float(value)


def _scaled(value: Any, divisor: float) -> float | None:
    known = _known(value)
    return None if known is None else known / divisor


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value if isinstance(value, str) else None


def process_identity(pid: int) -> tuple[str | None, str | None]:
    """(name, command line) of a pid through psutil; None where hidden or gone (e.g. other
    PID namespace: NVML reports host pids, which a container cannot see)."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            name = proc.name()
            try:
                cmdline: str | None = " ".join(proc.cmdline()) or None
            except psutil.AccessDenied:
                cmdline = None
        return name, cmdline
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None, None


class _DeviceReader:
    """Reads one device field by field; the first device-fatal error stops further queries."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self.nvml = nvml
        self.handle = handle
        self.fatal: str | None = None
        self.fatal_kind: StatusKind | None = None

    def query(self, name: str, *args: Any) -> Any:
        """The raw result of nvml.<name>(handle, *args), or None if it failed."""
        if self.fatal is not None:
            return None
        fn = getattr(self.nvml, name, None)
        if fn is None:  # older nvidia-ml-py without this call
            return None
        try:
            return fn(self.handle, *args)
        except self.nvml.NVMLError as err:
            if _is_fatal(self.nvml, err):
                self.fatal_kind, self.fatal = nvml_failure(self.nvml, err)
            return None


class NvmlGpuSource:
    """All NVIDIA GPUs on this host through NVML; see the module docstring.

    PCIe throughput costs NVML about 20 ms per counter per device (it samples the bus), so
    `pcie=False` skips it when ticks must be cheap.
    """

    def __init__(
        self,
        nvml: Any = None,
        *,
        pcie: bool = True,
        identify: Callable[[int], tuple[str | None, str | None]] = process_identity,
    ) -> None:
        self._nvml = nvml
        self._pcie = pcie
        self._identify = identify
        self._lock = threading.Lock()
        self._initialised = False
        self._failure: GpuStatus | None = None
        self._gpm: GpmReader | None = None
        self._gpm_reasons: dict[int, str] = {}
        self._gpm_pending: list[tuple[int, Any]] = []  # (index, handle) read once so far

    def _init_locked(self) -> GpuStatus | None:
        """Initialise once; a failure is remembered (retrying a missing driver each tick only
        costs time). Returns the failure status, if any."""
        if self._initialised or self._failure is not None:
            return self._failure
        if self._nvml is None:
            try:
                import pynvml
            except ImportError:
                reason = "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
                self._failure = failed("no_library", reason)
                return self._failure
            self._nvml = pynvml
        try:
            self._nvml.nvmlInit()
        except self._nvml.NVMLError as err:
            self._failure = failed(*nvml_failure(self._nvml, err))
            return self._failure
        self._initialised = True
        self._gpm = GpmReader(self._nvml)
        atexit.register(self.close)
        return None

    def read(self) -> tuple[GpuStatus, tuple[GpuDevice, ...]]:
        with self._lock:
            failure = self._init_locked()
            if failure is not None:
                return failure, ()
            nvml = self._nvml
            try:
                count = int(nvml.nvmlDeviceGetCount())
            except nvml.NVMLError as err:
                return failed(*nvml_failure(nvml, err)), ()
            self._gpm_reasons = {}
            self._gpm_pending = []
            read = [self._read_device(i) for i in range(count)]
            if self._gpm_pending:  # first samples just taken: their interval, once
                time.sleep(FIRST_INTERVAL_S)
                read = [(self._second_gpm(d), kind) for d, kind in read]
        devices = tuple(device for device, _ in read)
        status = device_status(devices, [kind for _, kind in read if kind])
        return replace(status, gpm_reason=combined_reason(self._gpm_reasons, count)), devices

    def _read_device(self, index: int) -> tuple[GpuDevice, StatusKind | None]:
        """The device, and the kind of failure that made it unreadable (None if readable)."""
        nvml = self._nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except nvml.NVMLError as err:
            kind, reason = nvml_failure(nvml, err)
            return empty_device(index, f"GPU {index}: {reason}"), kind
        reader = _DeviceReader(nvml, handle)
        rates = reader.query("nvmlDeviceGetUtilizationRates")
        memory = reader.query("nvmlDeviceGetMemoryInfo")
        rx, tx = self._pcie_kib_s(reader)
        device = GpuDevice(
            index=index,
            name=_text(reader.query("nvmlDeviceGetName")),
            uuid=_text(reader.query("nvmlDeviceGetUUID")),
            utilization_gpu=_known(getattr(rates, "gpu", None)),
            utilization_memory=_known(getattr(rates, "memory", None)),
            memory_used_mib=_scaled(getattr(memory, "used", None), MIB),
            memory_total_mib=_scaled(getattr(memory, "total", None), MIB),
            temperature_c=_known(
                reader.query("nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU)
            ),
            power_w=_scaled(reader.query("nvmlDeviceGetPowerUsage"), 1000.0),
            power_limit_w=_scaled(reader.query("nvmlDeviceGetEnforcedPowerLimit"), 1000.0),
            sm_clock_mhz=_known(reader.query("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM)),
            fan_percent=_known(reader.query("nvmlDeviceGetFanSpeed")),
            pcie_rx_kib_s=rx,
            pcie_tx_kib_s=tx,
            processes=self._processes(reader),
            energy_joules=_scaled(reader.query("nvmlDeviceGetTotalEnergyConsumption"), 1000.0),
        )
        if reader.fatal is None:
            return self._with_gpm(index, handle, device), None
        return replace(device, error=f"GPU {index}: {reader.fatal}"), reader.fatal_kind

    def _second_gpm(self, device: GpuDevice) -> GpuDevice:
        handle = next((h for i, h in self._gpm_pending if i == device.index), None)
        return device if handle is None else self._with_gpm(device.index, handle, device)

    def _with_gpm(self, index: int, handle: Any, device: GpuDevice) -> GpuDevice:
        if self._gpm is None:
            return device
        values, reason = self._gpm.read(index, handle)
        if reason is not None:
            self._gpm_reasons[index] = reason
        elif self._gpm.unprimed(index):
            self._gpm_pending.append((index, handle))
        return replace(device, sm_activity=values["sm_activity"],
                       sm_occupancy=values["sm_occupancy"],
                       tensor_activity=values["tensor_activity"],
                       dram_bandwidth=values["dram_bandwidth"])

    def _pcie_kib_s(self, reader: _DeviceReader) -> tuple[float | None, float | None]:
        if not self._pcie:
            return None, None
        counter = "nvmlDeviceGetPcieThroughput"
        rx = _known(reader.query(counter, self._nvml.NVML_PCIE_UTIL_RX_BYTES))
        return rx, _known(reader.query(counter, self._nvml.NVML_PCIE_UTIL_TX_BYTES))

    def _processes(self, reader: _DeviceReader) -> tuple[GpuProcess, ...]:
        raw = reader.query("nvmlDeviceGetComputeRunningProcesses") or ()
        processes = []
        for item in raw:
            pid = int(item.pid)
            name, cmdline = self._identify(pid)
            used = _scaled(getattr(item, "usedGpuMemory", None), MIB)
            processes.append(GpuProcess(pid, used, name, cmdline))
        return tuple(processes)

    def close(self) -> None:
        with self._lock:
            if not self._initialised:
                return
            self._initialised = False
            atexit.unregister(self.close)
            if self._gpm is not None:
                self._gpm.close()
                self._gpm = None
            # Shutting down after a GPU was lost can fail; there is nothing left to release.
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()


def empty_device(index: int, error: str) -> GpuDevice:
    """A device that could not be read at all."""
    return GpuDevice(
        index, None, None, None, None, None, None, None, None, None, None, None, None, None, (),
        error,
    )


def device_status(devices: tuple[GpuDevice, ...], failures: list[StatusKind]) -> GpuStatus:
    """Available while at least one GPU answers; the reason names what is wrong. `failures`
    holds the kind of each unreadable device's failure."""
    if not devices:
        return failed("no_devices", "NVML found no NVIDIA GPU on this host")
    broken = [d.error for d in devices if d.error]
    if not broken:
        return GpuStatus(True, None, False, "ok")
    summary = f"{len(broken)} of {counted(len(devices), 'GPU')} unreadable: " + "; ".join(
        e for e in broken if e
    )
    if len(broken) < len(devices):
        return GpuStatus(True, summary, False, "degraded")
    every_one_lost = failures and all(k == "gpu_lost" for k in failures)
    return failed("gpu_lost" if every_one_lost else "error", summary)
