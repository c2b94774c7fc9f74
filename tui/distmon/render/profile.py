"""A job's latest TensorFlow profile as text: the mean step split into input, device compute,
host compute, communication and other (one line for `--once`, one bar of cells for the
dashboard), the tf.data stage that holds the input back and its remedy, the stages with their
self time and parallelism, and the top ops.

Pure strings, no Textual and no rich: the widget colours the bar's segments by part. Every
name in a profile was escaped where it was read; it is escaped and elided again here, as any
outside string on its way to a terminal.
"""

from __future__ import annotations

import math
from typing import Final

from distcore.profile import ProfileError, ProfileSummary, Stage
from distcore.textsafe import terminal_text
from distmon.formats import UNKNOWN
from distmon.render.ledger import share_cells

PARTS: Final = ("input", "device compute", "host compute", "communication", "other")
PART_STYLES: Final = {
    "input": "yellow", "device compute": "green", "host compute": "cyan",
    "communication": "magenta", "other": "grey50",
}  # fmt: skip
PART_MARKS: Final = {
    "input": "▓", "device compute": "█", "host compute": "▒", "communication": "░",
    "other": "·",
}  # fmt: skip
SHOWN_STAGES: Final = 5
SHOWN_OPS: Final = 5
NAME_LIMIT: Final = 100


def milliseconds(ms: float) -> str:
    """`0.42 ms`, `62.3 ms`, `1.25 s`, `3.1e+06 s`; `–` for what is no duration."""
    if not math.isfinite(ms) or ms < 0:
        return UNKNOWN
    if ms < 10:
        return f"{ms:.2f} ms"
    if ms < 1000:
        return f"{ms:.1f} ms"
    seconds = ms / 1000
    return f"{seconds:.2f} s" if seconds < 1e5 else f"{seconds:.2g} s"


def step_parts(profile: ProfileSummary) -> list[tuple[str, float]]:
    """(part, ms) of the mean step, in PARTS' order."""
    total, count = profile.total, max(profile.step_count, 1)
    values = (total.input_ms, total.device_compute_ms, total.host_compute_ms,
              total.communication_ms, total.other_ms)
    return [(part, value / count) for part, value in zip(PARTS, values, strict=True)]


def step_ms(profile: ProfileSummary) -> float:
    return profile.total.step_ms / max(profile.step_count, 1)


def bar_segments(profile: ProfileSummary, width: int) -> list[tuple[str, int]]:
    """(part, cells) of the mean step, `width` cells in all; empty without steps."""
    return share_cells(step_parts(profile), width) if profile.step_count else []


def bar_text(segments: list[tuple[str, int]]) -> str:
    return "".join(PART_MARKS[part] * cells for part, cells in segments)


def _percent(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole > 0 and math.isfinite(part / whole) else UNKNOWN


def breakdown_line(profile: ProfileSummary) -> str:
    """`step 62.3 ms: input 59.1 ms (95%), device compute 0.00 ms (0%), ... (4 steps,
    highly input-bound)`; what the profile holds where it found no steps."""
    if not profile.step_count:
        return f"no steps found in {profile.events} events"
    whole = step_ms(profile)
    cells = ", ".join(f"{part} {milliseconds(ms)} ({_percent(ms, whole)})"
                      for part, ms in step_parts(profile))
    steps = f"{profile.step_count} step" + ("" if profile.step_count == 1 else "s")
    verdict = terminal_text(profile.input_verdict, 40)
    return f"step {milliseconds(whole)}: {cells} ({steps}, {verdict})"


def stage_name(stage: Stage) -> str:
    """The stage's own kind and where it sits: `MapAndBatch (Iterator::Root::...)`."""
    kind = stage.path.rpartition("::")[2]
    return f"{terminal_text(kind, 40)} ({terminal_text(stage.path, NAME_LIMIT)})"


def bottleneck_line(profile: ProfileSummary) -> str | None:
    """`bottleneck: MapAndBatch (...): <remedy>`; None where no stage holds the input back."""
    found = profile.bottleneck
    if found is None:
        return None
    return f"bottleneck: {stage_name(found.stage)}: {terminal_text(found.remedy, 300)}"


def _parallelism(stage: Stage) -> str:
    value = stage.stats.get("parallelism")
    shown = terminal_text(value, 12) if value is not None else UNKNOWN
    tuned = " autotuned" if str(stage.stats.get("autotune", "")).lower() == "true" else ""
    return f"{shown}{tuned}"


def stage_lines(profile: ProfileSummary, count: int = SHOWN_STAGES) -> list[str]:
    """One line per tf.data stage, the largest self time first."""
    return [f"{milliseconds(s.self_ms):>10}  {_percent(s.share, 1.0):>4}  "
            f"parallelism {_parallelism(s):<14} {stage_name(s)}"
            for s in profile.stages[:count]]


def op_lines(profile: ProfileSummary, count: int = SHOWN_OPS) -> list[str]:
    """One line per op, the largest self time first: time, count, where, kind, name."""
    return [f"{milliseconds(o.self_ms):>10}  ×{o.count:<6} {terminal_text(o.where, 24)} "
            f"{terminal_text(o.kind, 14)}  {terminal_text(o.name, NAME_LIMIT)}"
            for o in profile.top_ops[:count]]


def headline(profile: ProfileSummary) -> str:
    """What follows the bar: `52.3 ms a step, 95% input (highly input-bound)`."""
    if not profile.step_count:
        return breakdown_line(profile)
    verdict = terminal_text(profile.input_verdict, 40)
    return (f"{milliseconds(step_ms(profile))} a step, "
            f"{_percent(profile.input_percent, 100.0)} input ({verdict})")


def panel_lines(profile: ProfileSummary) -> list[str]:
    """The details panel's lines under the bar, the most telling first (the panel shows what
    fits): the bottleneck, the step in words, the stages, the top ops, the file."""
    bottleneck = bottleneck_line(profile)
    lines = [bottleneck] if bottleneck is not None else []
    lines.append(breakdown_line(profile))
    lines += [f"tf.data {line}" for line in stage_lines(profile)]
    lines += [f"op {line}" for line in op_lines(profile)]
    lines.append(f"from {terminal_text(profile.path, 200)}")
    return lines


def profile_lines(profile: ProfileSummary | ProfileError) -> list[str]:
    """The profile for `--once`: its file, the step line, the bottleneck, the stages and the
    top ops; an unreadable profile is its one line."""
    if isinstance(profile, ProfileError):
        return [f"profile: {terminal_text(profile.message, 300)} "
                f"({terminal_text(profile.path, 200)})"]
    lines = [f"profile: {terminal_text(profile.path, 200)}",
             f"  {breakdown_line(profile)}"]
    bottleneck = bottleneck_line(profile)
    if bottleneck is not None:
        lines.append(f"  {bottleneck}")
    if profile.stages:
        lines.append("  tf.data stages (self time, share of input, parallelism):")
        lines += [f"    {line}" for line in stage_lines(profile)]
    if profile.top_ops:
        lines.append("  top ops (self time):")
        lines += [f"    {line}" for line in op_lines(profile)]
    return lines
