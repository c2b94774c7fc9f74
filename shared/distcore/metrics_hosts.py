"""The host and GPU families of `distmon --serve --metrics`: one series per sampled host (this
machine, an ssh host, a job's worker) and per GPU on it, labelled by where the sample came from.

distcore.metrics owns the bounds, the label safety and the order; these functions only say
which families there are and what each host or GPU puts in them, through the `family` maker
that metrics passes (so a family here is bounded and made safe like every other).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from distcore.jobs.snapshots import Host
from distcore.telemetry.samples import GpuDevice

MIB = 1024 * 1024
HOST_LABELS = ("host", "source", "job", "worker")
GPU_LABELS = (*HOST_LABELS, "gpu", "uuid")


class Adds(Protocol):
    def add(self, labels: Sequence[object], value: float | None) -> None: ...


MakeFamily = Callable[[str, str, Sequence[str]], Adds]


def _ratio(percent: float | None) -> float | None:
    return None if percent is None else percent / 100.0


def _times(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def host_labels(host: Host) -> list[object]:
    return [host.name, host.source, host.job, host.worker]


def add_hosts(family: MakeFamily, hosts: Sequence[Host]) -> None:
    f = family
    sampled = f(
        "distmon_host_last_sample_timestamp_seconds",
        "Wall time of the host's newest sample",
        HOST_LABELS,
    )
    interval = f(
        "distmon_host_sample_interval_seconds", "How often the host is sampled", HOST_LABELS
    )
    reachable = f(
        "distmon_host_reachable", "1 while the host answers, 0 with an error", HOST_LABELS
    )
    cpu = f("distmon_host_cpu_ratio", "CPU busy, all cores (0-1)", HOST_LABELS)
    used = f("distmon_host_memory_used_bytes", "Memory in use", HOST_LABELS)
    total = f("distmon_host_memory_total_bytes", "Memory installed", HOST_LABELS)
    load = f("distmon_host_load1", "One-minute load average", HOST_LABELS)
    gpus = f("distmon_host_gpus", "GPUs seen on the host", HOST_LABELS)
    refused = f(
        "distmon_host_refused",
        "1 where the host sent more than distmon's caps allow and is no longer sampled",
        HOST_LABELS,
    )
    for host in hosts:
        labels = host_labels(host)
        sampled.add(labels, host.sampled_at)
        interval.add(labels, host.interval_seconds)
        reachable.add(labels, 1 if host.error is None else 0)
        cpu.add(labels, _ratio(host.cpu_percent))
        used.add(labels, _times(host.memory_used_mib, MIB))
        total.add(labels, _times(host.memory_total_mib, MIB))
        load.add(labels, host.load_avg_1m)
        gpus.add(labels, len(host.gpus))
        refused.add(labels, 1 if host.refused else 0)


# (name after distmon_gpu_, help, the figure of one GPU), in the exposition's order.
GPU_FIELDS: list[tuple[str, str, Callable[[GpuDevice], float | None]]] = [
    ("utilization_ratio", "Time a kernel ran (0-1)", lambda g: _ratio(g.utilization_gpu)),
    (
        "memory_utilization_ratio",
        "Time memory was read or written (0-1)",
        lambda g: _ratio(g.utilization_memory),
    ),
    ("memory_used_bytes", "Memory in use", lambda g: _times(g.memory_used_mib, MIB)),
    ("memory_total_bytes", "Memory on the GPU", lambda g: _times(g.memory_total_mib, MIB)),
    ("temperature_celsius", "Core temperature", lambda g: g.temperature_c),
    ("power_watts", "Power draw", lambda g: g.power_w),
    ("power_limit_watts", "Enforced power limit", lambda g: g.power_limit_w),
    ("sm_clock_hertz", "SM clock", lambda g: _times(g.sm_clock_mhz, 1e6)),
    ("fan_speed_ratio", "Fan speed (0-1)", lambda g: _ratio(g.fan_percent)),
    ("pcie_rx_bytes_per_second", "PCIe receive", lambda g: _times(g.pcie_rx_kib_s, 1024)),
    ("pcie_tx_bytes_per_second", "PCIe send", lambda g: _times(g.pcie_tx_kib_s, 1024)),
    ("processes", "Compute processes on the GPU", lambda g: len(g.processes)),
    # NVML GPM (Hopper and newer): absent, not zero, where the GPU has none.
    ("sm_activity_ratio", "Share of SMs busy, GPM SM_UTIL (0-1)",
     lambda g: _ratio(g.sm_activity)),
    ("sm_occupancy_ratio", "Resident warps over the maximum, GPM SM_OCCUPANCY (0-1)",
     lambda g: _ratio(g.sm_occupancy)),
    ("tensor_activity_ratio", "Cycles a tensor core issued, GPM ANY_TENSOR_UTIL (0-1)",
     lambda g: _ratio(g.tensor_activity)),
    ("dram_bandwidth_ratio", "Share of peak DRAM bandwidth used, GPM DRAM_BW_UTIL (0-1)",
     lambda g: _ratio(g.dram_bandwidth)),
]


def add_gpus(family: MakeFamily, hosts: Sequence[Host]) -> None:
    families = [(family(f"distmon_gpu_{n}", d, GPU_LABELS), get) for n, d, get in GPU_FIELDS]
    info = family("distmon_gpu_info", "The GPU's model name", [*GPU_LABELS, "name"])
    for host in hosts:
        for gpu in host.gpus:
            labels = [*host_labels(host), gpu.index, gpu.uuid]
            info.add([*labels, gpu.name], 1)
            for made, get in families:
                made.add(labels, get(gpu))
