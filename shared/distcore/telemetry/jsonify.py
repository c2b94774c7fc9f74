"""The `gpus` and `host` objects of `distmon --once --json` (snapshot version 1)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from distcore.snapshot import json_float
from distcore.telemetry.samples import GpuDevice, HostSample, ProcessSample, TelemetrySnapshot

# Every measurement of a device, in the order the JSON lists them.
DEVICE_MEASUREMENTS = (
    "utilization_gpu",
    "utilization_memory",
    "memory_used_mib",
    "memory_total_mib",
    "temperature_c",
    "power_w",
    "power_limit_w",
    "sm_clock_mhz",
    "energy_joules",
    "fan_percent",
    "pcie_rx_kib_s",
    "pcie_tx_kib_s",
    # NVML GPM, percent (null before Hopper and on a device's first sample)
    "sm_activity",
    "sm_occupancy",
    "tensor_activity",
    "dram_bandwidth",
)


def device_to_json(device: GpuDevice) -> dict[str, Any]:
    doc: dict[str, Any] = {"index": device.index, "name": device.name, "uuid": device.uuid}
    for field in DEVICE_MEASUREMENTS:
        doc[field] = json_float(getattr(device, field))
    doc["processes"] = [
        {**asdict(p), "used_memory_mib": json_float(p.used_memory_mib)} for p in device.processes
    ]
    doc["error"] = device.error
    return doc


def _process_to_json(proc: ProcessSample) -> dict[str, Any]:
    return {
        **asdict(proc),
        "cpu_percent": json_float(proc.cpu_percent),
        "rss_mib": json_float(proc.rss_mib),
    }


def host_to_json(host: HostSample) -> dict[str, Any]:
    return {
        "cpu_percent": json_float(host.cpu_percent),
        "per_core": [json_float(c) for c in host.per_core],
        "cores": len(host.per_core),
        "load_avg": list(host.load_avg) if host.load_avg is not None else None,
        "memory_used_mib": json_float(round(host.memory_used_mib, 1)),
        "memory_total_mib": json_float(round(host.memory_total_mib, 1)),
        "processes": [_process_to_json(p) for p in host.processes],
    }


def telemetry_to_json(snap: TelemetrySnapshot) -> tuple[dict[str, Any], dict[str, Any] | None]:
    gpus = {
        "available": snap.status.available,
        "reason": snap.status.reason,
        "simulated": snap.status.simulated,
        "kind": snap.status.kind,
        "gpm_reason": snap.status.gpm_reason,
        "sampled_at": snap.time,
        "devices": [device_to_json(d) for d in snap.devices],
    }
    return gpus, host_to_json(snap.host) if snap.host is not None else None
