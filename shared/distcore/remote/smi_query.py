"""nvidia-smi's GPU query over ssh: the command line, and its CSV lines parsed into `GpuDevice`s.

"[N/A]", "[Not Supported]" and friends are None, never 0; fields the query cannot give (PCIe
throughput, per-process command lines) are None / empty. GPM figures come from dmon (dmon.py)
and are merged in by GPU index.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from distcore.telemetry.gpm import GpmValues
from distcore.telemetry.samples import GpuDevice

QUERY: Final = (
    "index", "name", "uuid", "utilization.gpu", "utilization.memory", "memory.used",
    "memory.total", "temperature.gpu", "power.draw", "power.limit", "clocks.sm", "fan.speed",
)  # fmt: skip


def command(interval_ms: int) -> str:
    return (
        f"exec nvidia-smi --query-gpu={','.join(QUERY)} --format=csv,noheader,nounits"
        f" -lms {max(100, int(interval_ms))}"
    )


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None  # [N/A], [Not Supported], [Unknown Error], [GPU is lost], ...
    return value if value == value and abs(value) != float("inf") else None


def _text(text: str) -> str | None:
    return None if not text or text.startswith("[") else text


def parse_line(line: str) -> GpuDevice | None:
    """One CSV line of the query above; None for anything else (a banner, an error line)."""
    cells = [c.strip() for c in line.split(",")]
    if len(cells) != len(QUERY) or not (cells[0].isascii() and cells[0].isdigit()):
        return None
    if len(cells[0]) > 6:
        return None  # no GPU's index: int() of a long run of digits costs, or raises
    util, util_mem, mem_used, mem_total, temp, power, limit, clock, fan = map(_number, cells[3:])
    return GpuDevice(
        index=int(cells[0]), name=_text(cells[1]), uuid=_text(cells[2]),
        utilization_gpu=util, utilization_memory=util_mem,
        memory_used_mib=mem_used, memory_total_mib=mem_total,
        temperature_c=temp, power_w=power, power_limit_w=limit, sm_clock_mhz=clock,
        fan_percent=fan, pcie_rx_kib_s=None, pcie_tx_kib_s=None, processes=(),
    )  # fmt: skip


def with_gpm(device: GpuDevice, values: GpmValues | None) -> GpuDevice:
    if values is None:
        return device
    return replace(device, sm_activity=values["sm_activity"],
                   sm_occupancy=values["sm_occupancy"],
                   tensor_activity=values["tensor_activity"],
                   dram_bandwidth=values["dram_bandwidth"])  # fmt: skip
