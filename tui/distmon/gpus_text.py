"""The GPU and host lines of the readable `distmon --once` report, from the JSON document.

Unknown values print as "n/a", so a field NVML does not support never reads as zero.
"""

from __future__ import annotations

from typing import Any, TextIO

from distcore.textsafe import terminal_text


def _num(value: Any, unit: str = "", digits: int = 0) -> str:
    if value is None or isinstance(value, str):  # None, or "nan"/"inf" from json_float
        return "n/a"
    return f"{value:.{digits}f}{unit}"


def _memory(used: Any, total: Any) -> str:
    if used is None and total is None:
        return "n/a"
    if isinstance(used, int | float) and total is None:  # workers record what they use only
        return f"{used / 1024:.1f} GiB used"
    if used is None or total is None:
        return f"{_num(used)}/{_num(total)} MiB"
    return f"{used / 1024:.1f}/{total / 1024:.1f} GiB"


def gpu_line(dev: dict[str, Any]) -> str:
    head = f"  GPU {dev['index']}  {terminal_text(dev.get('name') or 'unknown', 40)}"
    if dev.get("error"):
        return f"{head}  ERROR: {terminal_text(dev['error'], 200)}"
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


def _age(seconds: Any) -> str:
    return "never sampled" if not isinstance(seconds, int | float) else f"{seconds:.0f} s ago"


def render_hosts_text(doc: dict[str, Any], out: TextIO) -> None:
    """Every host other than this one (each worker's system/ samples, remote hosts)."""
    others = [h for h in doc.get("hosts") or () if h.get("source") != "local"]
    if not others:
        return
    out.write(f"\nOther hosts: {len(others)}\n")
    for host in others:
        label = f"worker {host['worker']}" if host.get("worker") is not None else ""
        # A worker without a recorded host name is already called "<job> worker <i>".
        worker = f" ({label})" if label and not str(host["name"]).endswith(label) else ""
        stale = " STALE" if host.get("stale") else ""
        sim = " simulated" if host.get("simulated") else ""
        out.write(
            f"{terminal_text(host['name'], 60)}{worker}{sim}  {_age(host.get('age_seconds'))}"
            f"{stale}  cpu {_num(host.get('cpu_percent'), '%')}"
            f"  mem {_memory(host.get('memory_used_mib'), host.get('memory_total_mib'))}\n"
        )
        if host.get("error"):
            out.write(f"  ERROR: {terminal_text(host['error'], 200)}\n")
        for dev in host.get("gpus") or ():
            out.write(gpu_line(dev) + "\n")
