"""NVML's GPU Performance Monitoring (GPM): what the SMs, tensor cores and DRAM really do.

`util%` (nvmlDeviceGetUtilizationRates) is the share of time any kernel ran: a job starved of
data, bound on memory or waiting in a collective reads 100 %. GPM counts the work itself, with
no DCGM: the share of SMs busy, of warps resident, of cycles the tensor cores issued, of DRAM
bandwidth used. Hopper and newer only; NVML answers NVML_ERROR_NOT_SUPPORTED (or
`isSupportedDevice = 0`) before them.

A GPM figure is a rate between two samples (`nvmlGpmSampleGet`), so each reading is the
average over the interval since the last one (1 s in the dashboard, `telemetry.interval_seconds`
in the agent's recorder); a device's first reading is over FIRST_INTERVAL_S, taken at once
(NvmlGpuSource waits that long once), so a one-shot `distmon --once` has figures too. Two
sample buffers per device are allocated once and freed by `close()`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Final

# The GpuDevice attribute for each GPM metric id's name in pynvml.
METRICS: Final = (
    ("sm_activity", "NVML_GPM_METRIC_SM_UTIL"),
    ("sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY"),
    ("tensor_activity", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
    ("dram_bandwidth", "NVML_GPM_METRIC_DRAM_BW_UTIL"),
)
FIRST_INTERVAL_S: Final = 0.1
"""The first reading's interval: NVML's GPM sample needs about 100 ms to mean anything."""
NEEDS: Final = "NVML's GPM counters need a Hopper or newer GPU"
GpmValues = dict[str, float | None]


def empty() -> GpmValues:
    return dict.fromkeys(name for name, _ in METRICS)


@dataclass
class _DeviceGpm:
    reason: str | None = None
    """Why this device has no GPM (None: it has, or it was not asked yet)."""
    asked: bool = False
    samples: list[Any] = field(default_factory=list)
    """[previous, current] sample buffers from nvmlGpmSampleAlloc."""
    primed: bool = False
    """The previous buffer holds a sample: the next reading has an interval."""
    first: bool = True
    """No reading with figures yet."""


class GpmReader:
    """GPM per device index, over the NVML module it is given (pynvml, or the tests' fake).
    Not thread-safe: NvmlGpuSource calls it under its lock."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self._devices: dict[int, _DeviceGpm] = {}

    def read(self, index: int, handle: Any) -> tuple[GpmValues, str | None]:
        """The device's GPM percentages since the last read (None each before the second
        read), and the reason it has none where it has none."""
        state = self._devices.setdefault(index, _DeviceGpm())
        if not state.asked:
            state.asked = True
            state.reason = self._support(handle, state)
        if state.reason is not None:
            return empty(), state.reason
        nvml = self.nvml
        previous, current = state.samples
        try:
            nvml.nvmlGpmSampleGet(handle, current)
            values = self._metrics(previous, current) if state.primed else empty()
            state.first = not state.primed
        except nvml.NVMLError as err:  # a GPU lost mid-read: the next read starts again
            state.primed = False
            return empty(), f"GPM: {err}"
        state.samples.reverse()  # this sample is the next interval's start
        state.primed = True
        return values, None

    def unprimed(self, index: int) -> bool:
        """True for a device with GPM whose first sample was just taken: one more read, a
        moment later, gives it figures (what a one-shot `--once` needs)."""
        state = self._devices.get(index)
        return state is not None and state.reason is None and state.primed and state.first

    def _support(self, handle: Any, state: _DeviceGpm) -> str | None:
        nvml = self.nvml
        if not hasattr(nvml, "nvmlGpmMetricsGet") or not hasattr(nvml, "c_nvmlGpmMetricsGet_t"):
            return "this nvidia-ml-py has no GPM (nvmlGpmMetricsGet): pip install -U nvidia-ml-py"
        try:
            support = nvml.nvmlGpmQueryDeviceSupport(handle)
            if not support.isSupportedDevice:
                raise nvml.NVMLError(nvml.NVML_ERROR_NOT_SUPPORTED)
            state.samples = [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()]
        except nvml.NVMLError as err:
            self._free(state)
            return f"{err} ({NEEDS})"
        return None

    def _metrics(self, first: Any, second: Any) -> GpmValues:
        nvml = self.nvml
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(METRICS)
        request.sample1, request.sample2 = first, second
        for slot, (_, const) in enumerate(METRICS):
            request.metrics[slot].metricId = getattr(nvml, const)
        answer = nvml.nvmlGpmMetricsGet(request)
        values = empty()
        for slot, (name, _) in enumerate(METRICS):
            metric = answer.metrics[slot]
            if metric.nvmlReturn == nvml.NVML_SUCCESS:
                values[name] = _percent(metric.value)
        return values

    def _free(self, state: _DeviceGpm) -> None:
        for sample in state.samples:
            with contextlib.suppress(self.nvml.NVMLError):  # a lost GPU: nothing to free
                self.nvml.nvmlGpmSampleFree(sample)
        state.samples = []

    def close(self) -> None:
        for state in self._devices.values():
            self._free(state)
        self._devices.clear()


def _percent(value: float) -> float | None:
    """A GPM percentage, or None for what no percentage is (NaN, out of range by far)."""
    if not -1.0 <= value <= 101.0:  # NaN fails too
        return None
    return round(min(100.0, max(0.0, value)), 2)


def combined_reason(reasons: dict[int, str], devices: int) -> str | None:
    """One line for the devices without GPM (of `devices` read): a reason they share once."""
    if not reasons:
        return None
    distinct = set(reasons.values())
    if len(distinct) == 1:
        which = ("any GPU" if len(reasons) == devices > 1
                 else "GPU " + ", ".join(str(i) for i in sorted(reasons)))
        return f"no GPM activity counters on {which}: {distinct.pop()}"
    return "no GPM activity counters: " + "; ".join(
        f"GPU {i}: {r}" for i, r in sorted(reasons.items()))
