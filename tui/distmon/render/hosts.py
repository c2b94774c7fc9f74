"""The GPU panel: this machine's GPUs and host first, then every other host or worker seen.

Renders `Host`s from the job index's snapshot; the local host's sparklines come from the
sampler's history. Another host shows its age ("12 s ago") and is marked stale when older than
a few of its sample intervals. Unknown values show "n/a", never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from rich.text import Text

from distcore import names
from distcore.jobs.hosts import (
    also_here,
    host_age,
    host_context,
    is_stale,
    on_this_machine,
)
from distcore.jobs.snapshots import Host
from distcore.telemetry.samples import GpuDevice
from distcore.textsafe import terminal_text
from distmon.formats import age_text

SPARK = "▁▂▃▄▅▆▇█"
History = Callable[[str], Sequence[float | None]]


def no_history(key: str) -> Sequence[float | None]:
    return ()


def bar(fraction: float | None, width: int) -> Text:
    """`▕████▌   ▏` for 0..1; unknown is a dotted bar, never an empty (idle-looking) one."""
    if fraction is None or fraction != fraction:  # None or NaN
        return Text("▕" + "·" * width + "▏", style="dim")
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, part = divmod(eighths, 8)
    body = "█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")
    style = "red" if fraction >= 0.9 else "yellow" if fraction >= 0.6 else "green"
    return Text.assemble("▕", (body.ljust(width), style), "▏")


def sparkline(values: Sequence[float | None], width: int, top: float = 100.0) -> Text:
    """The newest `width` values as ▁..█ (0..top); unknown samples are blank."""
    chars = []
    for value in list(values)[-width:]:
        if value is None or not math.isfinite(value):  # samples from a logdir can be NaN
            chars.append(" ")
        else:
            chars.append(SPARK[min(len(SPARK) - 1, max(0, int(value / top * len(SPARK))))])
    return Text("".join(chars).rjust(width), style="cyan")


def _pct(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{value:3.0f}%"


def _gib(mib: float | None) -> str:
    return "n/a" if mib is None or mib != mib else f"{mib / 1024:.1f}"


def _memory(used: float | None, total: float | None) -> str:
    """`29.3/80.0G`; `29.3G used` where the total is not known (a worker's recorded samples);
    `n/a` where neither is."""
    if used is None and total is None:
        return "n/a"
    if total is None:
        return f"{_gib(used)}G used"
    return f"{_gib(used)}/{_gib(total)}G"


def gpu_line(gpu: GpuDevice, history: History, width: int) -> Text:
    """One device: compact under 70 columns (bars and percentages), with name and GiB above."""
    label = terminal_text(gpu.name or "GPU")[:20]
    if gpu.error:
        error = terminal_text(gpu.error, 200)
        return Text(f"{gpu.index} {label}: {error}", style="red", no_wrap=True, overflow="crop")
    mem = (
        gpu.memory_used_mib / gpu.memory_total_mib
        if gpu.memory_used_mib is not None and gpu.memory_total_mib
        else None
    )
    util = None if gpu.utilization_gpu is None else gpu.utilization_gpu / 100
    temp = "n/a" if gpu.temperature_c is None else f"{gpu.temperature_c:.0f}°C"
    power = "n/a" if gpu.power_w is None else f"{gpu.power_w:.0f}W"
    mem_pct = _pct(None if mem is None else mem * 100)
    line = Text(no_wrap=True, overflow="crop")
    line.append(f"{gpu.index} ", style="bold")
    if width >= 70:
        line.append(f"{label} ")
    bars = 6 if width < 70 else 10
    line.append_text(bar(util, bars))
    line.append(_pct(gpu.utilization_gpu))
    line.append_text(activity_text(gpu, wide=width >= 70))
    line.append(" m")
    line.append_text(bar(mem, bars))
    line.append(mem_pct if width < 70 else _memory(gpu.memory_used_mib, gpu.memory_total_mib))
    line.append(f" {temp} {power} ")
    room = width - line.cell_len
    if room >= 4:
        line.append_text(sparkline(history(names.gpu_tag(gpu.index, "utilization")), room))
    return line


def activity_text(gpu: GpuDevice, *, wide: bool) -> Text:
    """What the GPU does while util% counts it busy (NVML GPM): ` sm 72% tc 42%`, wide
    ` sm 72% occ 38% tensor 42% dram 56%`; nothing where GPM gave nothing (before Hopper)."""
    fields = (("sm", "sm", gpu.sm_activity), ("occ", None, gpu.sm_occupancy),
              ("tensor", "tc", gpu.tensor_activity), ("dram", None, gpu.dram_bandwidth))
    text = Text()
    for long, short, value in fields:
        name = long if wide else short
        if value is None or name is None:
            continue
        low = long == "sm" and value < 50 and (gpu.utilization_gpu or 0) >= 90
        text.append(f" {name} {_pct(value).strip()}", style="yellow" if low else "")
    return text


def host_line(host: Host, history: History, width: int) -> Text:
    load = "" if host.load_avg_1m is None else f" load {host.load_avg_1m:.1f}"
    cores = f" ({host.cpu_cores} cores){load}" if width >= 70 and host.cpu_cores else ""
    line = Text.assemble(
        ("host ", "bold"),
        f"cpu {_pct(host.cpu_percent)}{cores} ",
        f"mem {_memory(host.memory_used_mib, host.memory_total_mib)} ",
        no_wrap=True,
        overflow="crop",
    )
    room = width - line.cell_len
    if room >= 4:
        line.append_text(sparkline(history(names.HOST_CPU_PERCENT), room))
    return line


def _heading(host: Host, now: float) -> Text:
    """`gpu7 · worker 1 · job quickstart · 12 s ago [stale]`."""
    bits = [terminal_text(host.name, 40), *host_context(host)]
    if host.simulated:
        bits.append("simulated")
    age = host_age(host, now)
    bits.append(age_text(age))
    stale = is_stale(host, now)
    line = Text(" · ".join(bits), style="dim" if stale else "bold", no_wrap=True, overflow="crop")
    if stale:
        line.append(" stale", style="yellow")
    return line


def _local_lines(host: Host, history: History, width: int) -> list[Text]:
    lines: list[Text] = []
    if not host.gpus:
        lines.append(_no_gpu(host))
    lines += [gpu_line(g, history, width) for g in host.gpus]
    lines += _gpm_note(host)
    if host.cpu_percent is not None:
        lines.append(host_line(host, history, width))
    return lines


def _no_gpu(host: Host) -> Text:
    """Why the host shows no GPU (NVML's or nvidia-smi's reason: outside text, escaped)."""
    reason = terminal_text(host.gpu_reason, 200) if host.gpu_reason else "unknown reason"
    return Text(f"no GPU: {reason}", style="yellow", no_wrap=True, overflow="ellipsis")


def _gpm_note(host: Host) -> list[Text]:
    """Why some of the host's GPUs show no GPM figures, once, under them."""
    if not (host.gpus and host.gpm_reason):
        return []
    return [Text(terminal_text(host.gpm_reason, 200), style="dim", no_wrap=True,
                 overflow="ellipsis")]  # fmt: skip


def render_hosts(hosts: Sequence[Host], history: History, now: float, width: int) -> Text:
    """Local first (with its history), then each other host under a heading with its age."""
    if not hosts:
        return Text("sampling GPUs…", style="dim")
    hosts, here = on_this_machine(hosts)
    lines: list[Text] = []
    for host in hosts:
        if host.source == "local":
            lines += _local_lines(host, history, width)
            if here:
                lines.append(_also_here(here))
            continue
        lines.append(_heading(host, now))
        if host.error:
            lines.append(Text(terminal_text(host.error, 200), style="red"))
        if not host.gpus and host.gpu_reason and not host.error:
            lines.append(_no_gpu(host))
        lines += [gpu_line(g, no_history, width) for g in host.gpus]
        lines += _gpm_note(host)
        if host.cpu_percent is not None or host.memory_used_mib is not None:
            lines.append(host_line(host, no_history, width))
    return Text("\n").join(lines)


def _also_here(workers: Sequence[Host]) -> Text:
    """The jobs' workers that ran on this machine: its GPUs above are theirs."""
    return Text(also_here(workers), style="dim", no_wrap=True, overflow="ellipsis", end="")


def gpus_title(hosts: Sequence[Host]) -> str:
    hosts, _ = on_this_machine(hosts)
    local = next((h for h in hosts if h.source == "local"), None)
    others = len(hosts) - (local is not None)
    title = "GPUs (simulated)" if local is not None and local.simulated else "GPUs"
    return f"{title} · {others} more host{'s' if others != 1 else ''}" if others else title
