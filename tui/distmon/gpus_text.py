"""The GPU and host lines of the readable `distmon --once` report, from the JSON document.

Unknown values print as "n/a", so a field NVML does not support never reads as zero.
"""

from __future__ import annotations

from typing import Any, TextIO


def _num(value: Any, unit: str = "", digits: int = 0) -> str:
    if value is None or isinstance(value, str):  # None, or "nan"/"inf" from json_float
        return "n/a"
    return f"{value:.{digits}f}{unit}"


def _memory(used: Any, total: Any) -> str:
    if used is None or total is None:
        return f"{_num(used)}/{_num(total)} MiB"
    return f"{used / 1024:.1f}/{total / 1024:.1f} GiB"


def gpu_line(dev: dict[str, Any]) -> str:
    head = f"  GPU {dev['index']}  {dev.get('name') or 'unknown'}"
    if dev.get("error"):
        return f"{head}  ERROR: {dev['error']}"
    procs = dev.get("processes") or []
    return (
        f"{head}  util {_num(dev.get('utilization_gpu'), '%')}"
        f"  mem {_memory(dev.get('memory_used_mib'), dev.get('memory_total_mib'))}"
        f"  {_num(dev.get('temperature_c'), '°C')}"
        f"  {_num(dev.get('power_w'), 'W')}/{_num(dev.get('power_limit_w'), 'W')}"
        f"  {len(procs)} proc"
    )


def host_line(host: dict[str, Any]) -> str:
    load = host.get("load_avg")
    load_text = " ".join(f"{x:.2f}" for x in load) if load else "n/a"
    return (
        f"  host  cpu {_num(host.get('cpu_percent'), '%')} of {host.get('cores', '?')} cores"
        f"  load {load_text}"
        f"  mem {_memory(host.get('memory_used_mib'), host.get('memory_total_mib'))}"
    )


def render_gpus_text(doc: dict[str, Any], out: TextIO) -> None:
    """Writes 'GPUs: ...' then one line per device and one for the host."""
    gpus = doc.get("gpus") or {}
    label = " (simulated)" if gpus.get("simulated") else ""
    devices = gpus.get("devices") or []
    if gpus.get("available"):
        out.write(f"GPUs{label}: {len(devices)}\n")
    else:
        out.write(f"GPUs: none — {gpus.get('reason') or 'not sampled'}\n")
    if gpus.get("available") and gpus.get("reason"):
        out.write(f"  note: {gpus['reason']}\n")
    for dev in devices:
        out.write(gpu_line(dev) + "\n")
    if doc.get("host"):
        out.write(host_line(doc["host"]) + "\n")
