"""The GPU and host lines of the readable `distmon --once` report, from the typed snapshot.

Unknown values print as "n/a", so a field NVML does not support never reads as zero. Figures
read as in the dashboard's panels (distmon.formats).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TextIO

from distcore.jobs.hosts import also_here, host_age, host_context, is_stale, on_this_machine
from distcore.jobs.snapshots import Host
from distcore.telemetry.samples import GpuDevice, HostSample, TelemetrySnapshot
from distcore.textsafe import terminal_text
from distmon.formats import age_text, measured

NAME_LIMIT = 400  # characters of any one outside string (a reason, a note) before the line's own


def _known(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _memory(used: float | None, total: float | None) -> str:
    if used is None and total is None:
        return "n/a"
    if _known(used) and total is None:  # workers record what they use only
        return f"{used / 1024:.1f} GiB used"  # type: ignore[operator]
    if not (_known(used) and _known(total)):
        return f"{measured(used)}/{measured(total)} MiB"
    return f"{used / 1024:.1f}/{total / 1024:.1f} GiB"  # type: ignore[operator]


def gpu_line(dev: GpuDevice) -> str:
    head = f"  GPU {dev.index}  {terminal_text(dev.name or 'unknown', 40)}"
    if dev.error:
        return f"{head}  ERROR: {terminal_text(dev.error, 200)}"
    return (
        f"{head}  util {measured(dev.utilization_gpu, '%')}{_activity(dev)}"
        f"  mem {_memory(dev.memory_used_mib, dev.memory_total_mib)}"
        f"  {measured(dev.temperature_c, '°C')}"
        f"  {measured(dev.power_w, 'W')}/{measured(dev.power_limit_w, 'W')}"
        f"  {len(dev.processes)} proc"
    )


def _activity(dev: GpuDevice) -> str:
    """NVML GPM's figures where the GPU has them: `  sm 72%  tensor 42%  dram 56%`."""
    fields = (("sm", dev.sm_activity), ("occupancy", dev.sm_occupancy),
              ("tensor", dev.tensor_activity), ("dram", dev.dram_bandwidth))
    return "".join(f"  {name} {measured(v, '%')}" for name, v in fields if _known(v))


def host_line(host: HostSample) -> str:
    load = " ".join(f"{x:.2f}" for x in host.load_avg) if host.load_avg else "n/a"
    # Memory to 0.1 MiB first, as the JSON document holds it.
    used, total = round(host.memory_used_mib, 1), round(host.memory_total_mib, 1)
    return (
        f"  host  cpu {measured(host.cpu_percent, '%')} of {len(host.per_core)} cores"
        f"  load {load}  mem {_memory(used, total)}"
    )


def render_gpus_text(telemetry: TelemetrySnapshot | None, out: TextIO) -> None:
    """Writes 'GPUs: ...' then one line per device and one for the host."""
    status = telemetry.status if telemetry is not None else None
    reason = terminal_text(status.reason, NAME_LIMIT) if status and status.reason else None
    devices = telemetry.devices if telemetry is not None else ()
    if status is not None and status.available:
        label = " (simulated)" if status.simulated else ""
        out.write(f"GPUs{label}: {len(devices)}\n")
        if reason:
            out.write(f"  note: {reason}\n")
        if status.gpm_reason:
            out.write(f"  note: {terminal_text(status.gpm_reason, NAME_LIMIT)}\n")
    else:
        out.write(f"GPUs: none — {reason or 'not sampled'}\n")
    for dev in devices:
        out.write(gpu_line(dev) + "\n")
    if telemetry is not None and telemetry.host is not None:
        out.write(host_line(telemetry.host) + "\n")


def _age(host: Host, now: float) -> str:
    age = host_age(host, now)
    return age_text(round(age, 3) if age is not None and math.isfinite(age) else None)


def render_hosts_text(hosts: Sequence[Host], now: float, out: TextIO) -> None:
    """Every host other than this one (each worker's system/ samples, remote hosts). A job's
    worker that ran on this machine is named under it instead, as the dashboard does
    (on_this_machine): this machine's own GPUs and host lines above are its."""
    shown, here = on_this_machine(hosts)
    if here:
        out.write(f"  {also_here(here)}\n")
    others = [h for h in shown if h.source != "local"]
    if not others:
        return
    out.write(f"\nOther hosts: {len(others)}\n")
    for host in others:
        name = terminal_text(host.name, NAME_LIMIT)
        context = host_context(host)  # as the dashboard's heading says it
        worker = f" ({', '.join(context)})" if context else ""
        stale = " STALE" if is_stale(host, now) else ""
        sim = " simulated" if host.simulated else ""
        out.write(
            f"{terminal_text(name, 60)}{worker}{sim}  {_age(host, now)}"
            f"{stale}  cpu {measured(host.cpu_percent, '%')}"
            f"  mem {_memory(host.memory_used_mib, host.memory_total_mib)}\n"
        )
        if host.error:
            out.write(f"  ERROR: {terminal_text(host.error, 200)}\n")
        elif not host.gpus and host.gpu_reason:
            out.write(f"  no GPU: {terminal_text(host.gpu_reason, 200)}\n")
        for dev in host.gpus:
            out.write(gpu_line(dev) + "\n")
        if host.gpus and host.gpm_reason:
            out.write(f"  note: {terminal_text(host.gpm_reason, NAME_LIMIT)}\n")
