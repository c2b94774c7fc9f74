"""The GPU, alerts and details panels: each renders a pure function of its state."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget

from distcore import names
from distcore.alerts import Alert
from distcore.textsafe import terminal_text
from distmon.widgets.model import Job, Plan

if TYPE_CHECKING:  # telemetry's package loads NVML bindings and psutil: not before first paint
    from distcore.telemetry.model import GpuDevice, HostSample, TelemetrySnapshot

TEXT_LIMIT = 300  # characters of one outside string in a panel
SPARK = "▁▂▃▄▅▆▇█"
SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
SEVERITY_MARK = {"critical": "✖", "warning": "▲", "info": "●"}
History = Callable[[str], Sequence[float | None]]


def bar(fraction: float | None, width: int) -> Text:
    """`▕████▌   ▏` for 0..1; unknown is a dotted bar, never an empty (idle-looking) one."""
    if fraction is None:
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
    return "n/a" if value is None else f"{value:3.0f}%"


def _gib(mib: float | None) -> str:
    return "n/a" if mib is None else f"{mib / 1024:.1f}"


def gpu_line(gpu: GpuDevice, history: History, width: int) -> Text:
    """One device: compact under 70 columns (bars and percentages), with name and GiB above."""
    if gpu.error:
        return Text(f"{gpu.index} {gpu.name or 'GPU'}: {gpu.error}", style="red", no_wrap=True)
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
        line.append(f"{(gpu.name or 'GPU')[:20]} ")
    bars = 6 if width < 70 else 10
    line.append_text(bar(util, bars))
    line.append(f"{_pct(gpu.utilization_gpu)} m")
    line.append_text(bar(mem, bars))
    line.append(
        mem_pct if width < 70 else f"{_gib(gpu.memory_used_mib)}/{_gib(gpu.memory_total_mib)}G"
    )
    line.append(f" {temp} {power} ")
    room = width - line.cell_len
    if room >= 4:
        line.append_text(sparkline(history(names.gpu_tag(gpu.index, "utilization")), room))
    return line


def host_line(host: HostSample, history: History, width: int) -> Text:
    load = "" if host.load_avg is None else f" load {host.load_avg[0]:.1f}"
    cores = f" ({len(host.per_core)} cores){load}" if width >= 70 else ""
    line = Text.assemble(
        ("host ", "bold"),
        f"cpu {host.cpu_percent:3.0f}%{cores} ",
        f"mem {_gib(host.memory_used_mib)}/{_gib(host.memory_total_mib)}G ",
        no_wrap=True,
        overflow="crop",
    )
    room = width - line.cell_len
    if room >= 4:
        line.append_text(sparkline(history(names.HOST_CPU_PERCENT), room))
    return line


def render_gpus(snap: TelemetrySnapshot | None, history: History, width: int) -> Text:
    if snap is None:
        return Text("sampling GPUs…", style="dim")
    lines: list[Text] = []
    if not snap.status.available:
        lines.append(Text(f"no GPU: {snap.status.reason or 'unknown reason'}", style="yellow"))
    lines += [gpu_line(g, history, width) for g in snap.devices]
    if snap.host is not None:
        lines.append(host_line(snap.host, history, width))
    return Text("\n").join(lines)


def render_alerts(alerts: Sequence[Alert]) -> Text:
    """One alert a line; the stylesheet cuts them in a narrow panel and wraps them in a wide one."""
    if not alerts:
        return Text("no alerts", style="green")
    return Text("\n").join(alert_line(a) for a in alerts)


def alert_line(alert: Alert) -> Text:
    return Text.assemble(
        (f"{SEVERITY_MARK[alert.severity]} ", SEVERITY_STYLE[alert.severity]),
        (f"{safe(alert.run)}: " if alert.run else "", "bold"),
        safe(alert.message),
    )


def safe(text: object) -> str:
    """An outside string (names, paths, run.json fields) as the panels show it."""
    return terminal_text(text, TEXT_LIMIT)


def render_details(job: Job, plan: Plan | None, alerts: Sequence[Alert] = ()) -> Text:
    """The focused job: where it is, its plan from run.json, and its alerts in full."""
    main = job.main
    parts = ", ".join(p or "(run)" for p in job.runs)
    lines = [
        Text.assemble(("job ", "bold"), safe(job.name), f"  [{job.status}]"),
        Text(f"path {safe(job.job_dir)}"),
        Text(f"runs {parts}; {len(main.scalars)} tags; {main.files} files"),
    ]
    if main.problems:
        lines.append(Text(f"problems: {safe('; '.join(main.problems))}", style="red"))
    lines += [alert_line(a) for a in alerts if a.run in {r.name for r in job.runs.values()}]
    if plan is None:
        lines.append(Text("no run.json (not written by distagent)", style="dim"))
        return Text("\n").join(lines)
    batch = "–" if plan.global_batch_size is None else str(plan.global_batch_size)
    replicas = "–" if plan.replicas is None else str(plan.replicas)
    lines.append(
        Text(f"distagent: {safe(plan.status or '?')}; {replicas} replicas; global batch {batch}")
    )
    lines.append(Text(f"learning rate {safe(plan.learning_rate or '–')}"))
    if plan.error:
        lines.append(Text(f"error: {safe(plan.error)}", style="red"))
    return Text("\n").join(lines)


class Panel(Widget):
    """A focusable, scrollable text panel (tab reaches it; j/k scroll it).

    It keeps a drawing function, not text, and draws at render time with its current width, so
    a panel laid out after its first update still fits its lines to its real size.
    """

    can_focus = True
    BINDINGS = [  # noqa: RUF012 - Textual's convention
        Binding("j", "scroll_down", "down", show=False),
        Binding("k", "scroll_up", "up", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._draw: Callable[[int], Text] = lambda width: Text()
        self._text: Text | None = None

    def show(self, draw: Callable[[int], Text], *, layout: bool = False) -> None:
        """New content; `layout` when its height may change (the details panel is `auto`)."""
        self._draw = draw
        self.refresh(layout=layout)

    def update(self, text: Text) -> None:
        self.show(lambda width: text, layout=True)

    def render(self) -> Text:
        return self._draw(self.content_size.width or self.size.width)
