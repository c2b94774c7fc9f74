"""Simulated GPUs for demos and tests (`distmon --simulate-gpus N`); never used unless asked for.

Curves are pure functions of (seconds since start, device index), so the same clock gives the
same numbers on every run: a training job at ~90 % utilization with a short input stall every
minute, memory that fills during warm-up then stays flat, temperature and power that follow the
load, and an energy counter that is the power's exact integral (so it only grows). Every device
is named "(simulated)" and the status says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from distcore.telemetry.samples import GpuDevice, GpuStatus
from distcore.wording import counted

MODEL = "NVIDIA A100-SXM4-80GB"
MEMORY_TOTAL_MIB = 81920.0
POWER_LIMIT_W = 400.0
IDLE_POWER_W = 60.0
STALL_PERIOD_S = 60.0
STALL_LENGTH_S = 6.0
WARMUP_S = 20.0


def _wobble(t: float, index: int) -> float:
    """Deterministic noise in [-1, 1]: a sum of incommensurate sines, phase-shifted per device."""
    phase = 1.7 * index
    return (math.sin(0.9 * t + phase) + math.sin(2.3 * t + 2 * phase) * 0.5) / 1.5


def utilization(t: float, index: int) -> float:
    if t < WARMUP_S * 0.25:
        return 0.0  # model building: the GPU really is idle
    stalled = (t + 7.0 * index) % STALL_PERIOD_S < STALL_LENGTH_S
    base = 12.0 if stalled else 91.0
    return round(min(100.0, max(0.0, base + 5.0 * _wobble(t, index))), 1)


def memory_used_mib(t: float, index: int) -> float:
    filled = min(1.0, t / WARMUP_S)
    return round(600.0 + filled * (0.62 + 0.03 * index) * MEMORY_TOTAL_MIB, 1)


def temperature_c(t: float, index: int) -> float:
    # Heats up over ~2 minutes towards 32 + 0.4 * load (a 400 W board tops out around 75 °C).
    warm = 1.0 - math.exp(-t / 120.0)
    return round(32.0 + warm * 0.4 * utilization(t, index) + index % 4, 1)


def power_w(t: float, index: int) -> float:
    load = utilization(t, index) / 100.0
    return round(IDLE_POWER_W + load * (POWER_LIMIT_W - IDLE_POWER_W - 30.0), 1)


def _wobble_integral(t: float, index: int) -> float:
    """The integral of _wobble from 0 to t (up to a constant, which cancels in differences)."""
    phase = 1.7 * index
    return (-math.cos(0.9 * t + phase) / 0.9 - 0.5 * math.cos(2.3 * t + 2 * phase) / 2.3) / 1.5


def _stalled_before(x: float) -> float:
    """Seconds of [0, x] inside a stall (x on the stall's own clock, t + 7 × index)."""
    periods, into = divmod(x, STALL_PERIOD_S)
    return periods * STALL_LENGTH_S + min(into, STALL_LENGTH_S)


def energy_joules(t: float, index: int) -> float:
    """The energy counter at t: power_w's integral from 0 (before utilization's rounding),
    as NVML's counts from the driver's load. Power never falls below idle: it only grows."""
    busy_from = WARMUP_S * 0.25
    joules = IDLE_POWER_W * max(t, 0.0)
    if t > busy_from:
        shift = 7.0 * index
        stalled = _stalled_before(t + shift) - _stalled_before(busy_from + shift)
        util_seconds = (91.0 * (t - busy_from) - 79.0 * stalled
                        + 5.0 * (_wobble_integral(t, index) - _wobble_integral(busy_from, index)))
        joules += util_seconds / 100.0 * (POWER_LIMIT_W - IDLE_POWER_W - 30.0)
    return round(joules, 1)


def simulated_device(t: float, index: int) -> GpuDevice:
    util = utilization(t, index)
    return GpuDevice(
        index=index,
        name=f"{MODEL} (simulated)",
        uuid=f"GPU-simulated-{index:04d}",
        utilization_gpu=util,
        utilization_memory=round(util * 0.55, 1),
        memory_used_mib=memory_used_mib(t, index),
        memory_total_mib=MEMORY_TOTAL_MIB,
        temperature_c=temperature_c(t, index),
        power_w=power_w(t, index),
        power_limit_w=POWER_LIMIT_W,
        sm_clock_mhz=1410.0 if util > 20 else 1095.0,
        fan_percent=None,  # SXM boards have no fan NVML can report: realistic N/A
        pcie_rx_kib_s=round(util * 180.0, 1),
        pcie_tx_kib_s=round(util * 40.0, 1),
        processes=(),
        energy_joules=energy_joules(t, index),
    )


class SimulatedGpuSource:
    """`count` simulated GPUs; `clock` gives seconds. The first reading is `start_offset` seconds
    into the simulated job (default: 5.5 minutes in, past warm-up, so a one-shot report shows a
    busy GPU; 0 shows the warm-up)."""

    def __init__(
        self,
        count: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        start_offset: float = 330.0,
    ) -> None:
        if count < 1:
            raise ValueError("a simulated source needs at least one GPU")
        self._count = count
        self._clock = clock
        self._offset = start_offset
        self._start: float | None = None

    def read(self) -> tuple[GpuStatus, tuple[GpuDevice, ...]]:
        now = self._clock()
        if self._start is None:
            self._start = now
        t = now - self._start + self._offset
        devices = tuple(simulated_device(t, i) for i in range(self._count))
        reason = (f"simulated: {counted(self._count, 'GPU')} (--simulate-gpus), "
                  "not real hardware")
        return GpuStatus(True, reason, simulated=True, kind="simulated"), devices

    def close(self) -> None:
        pass
