"""From a profile's bytes to its `ProfileSummary`: decode, one pass over the events, then
steps, the tf.data bottleneck, the top ops and the device streams.

The bulk decoder (bulk.py, bulkcollect.py, spans.py) reads the events as arrays; the message
decoder (decode.py, collect.py, steps.py), an object an event, gives the same summary more
slowly and is kept as the reference it is tested against (`reference=True`).

Runs on untrusted bytes in the parsing subprocess (runner.py); raises ProfileUnreadable for a
file that is no profile or holds nothing to summarise.
"""

from __future__ import annotations

from typing import Final

from distcore.profile import bulk, bulkcollect, decode, spans, steps, tfdata
from distcore.profile.collect import Collected, collect
from distcore.profile.summary import (
    NAME_LIMIT,
    Bottleneck,
    OpTime,
    ProfileSummary,
    Stage,
    StepTime,
    StreamTime,
)
from distcore.textsafe import terminal_text

MAX_STEP: Final = (1 << 53) - 1  # a step number JSON readers keep exactly
MAX_STEPS_SHOWN: Final = 1000
MAX_STAGES: Final = 10
MAX_OPS: Final = 20
MAX_STREAMS: Final = 64
_STAT_TEXT_LIMIT: Final = 100


def summarize_bytes(data: bytes, path: str, *, reference: bool = False) -> ProfileSummary:
    if reference:
        space = decode.parse(data)
        hostnames = decode.hostnames(space)
        planes = decode.planes(space)
        plane_names = [p.name for p in planes]
        collected = collect(planes, MAX_STEP)
        source, found = steps.breakdown(collected) if collected.events else ("none", [])
    else:
        space = bulk.parse(data)
        hostnames = decode.hostnames(space)
        events = bulk.planes(space)
        del space  # the planes hold what is read on; the parsed file's memory goes
        plane_names = [p.name for p in events]
        collected, times = bulkcollect.collect(events, MAX_STEP)
        del events
        source, found = spans.breakdown(collected, times) if collected.events else ("none", [])
    if not collected.events:
        names = ", ".join(terminal_text(p, 40) for p in plane_names[:5]) or "none"
        raise decode.ProfileUnreadable(f"no events on the host or a GPU (planes: {names})")
    total = steps.total(found)
    percent = 100.0 * total.input_ps / total.step_ps if total.step_ps else 0.0
    stages, bottleneck = _input_pipeline(collected)
    return ProfileSummary(
        path=terminal_text(path),
        hostnames=tuple(terminal_text(h, NAME_LIMIT) for h in hostnames[:8]),
        events=collected.events,
        step_source=source,
        steps=tuple(_step(s) for s in found[:MAX_STEPS_SHOWN]),
        step_count=len(found),
        total=_step(total),
        input_percent=round(percent, 2),
        input_verdict=steps.input_verdict(percent) if found else "no steps found",
        stages=stages,
        bottleneck=bottleneck,
        top_ops=_top_ops(collected),
        streams=_streams(collected),
    )


def _ms(ps: int) -> float:
    return round(ps / 1e9, 6)


def _step(step: steps.Step) -> StepTime:
    return StepTime(
        step.number, _ms(step.step_ps), _ms(step.input_ps), _ms(step.device_compute_ps),
        _ms(step.host_compute_ps), _ms(step.communication_ps), _ms(step.other_ps),
    )


def _stat(value: int | float | str) -> int | float | str:
    if isinstance(value, str):
        return terminal_text(value, _STAT_TEXT_LIMIT)
    if isinstance(value, int):
        return decode.clamp(value, -MAX_STEP, MAX_STEP)
    return value if abs(value) < 1e300 else 0.0  # nan and infinities: no number to show


def _stage(stage: tfdata.StageTime, input_ps: int) -> Stage:
    stats: dict[str, int | float | str] = {
        k: _stat(stage.stats[k]) for k in tfdata.SHOWN_STATS if k in stage.stats
    }
    share = round(stage.self_ps / input_ps, 4) if input_ps else 0.0
    return Stage(terminal_text(stage.path, NAME_LIMIT), _ms(stage.self_ps), share, stats)


def _input_pipeline(collected: Collected) -> tuple[tuple[Stage, ...], Bottleneck | None]:
    stages = tfdata.stage_times(collected.iterators)
    named = tfdata.candidates(stages)
    input_ps = sum(s.self_ps for s in named)
    shown = tuple(_stage(s, input_ps) for s in named[:MAX_STAGES])
    if not named or not input_ps:
        return shown, None
    top = named[0]
    remedy = terminal_text(tfdata.remedy(top, top.self_ps / input_ps), 2 * NAME_LIMIT)
    return shown, Bottleneck(shown[0], remedy)


def _top_ops(collected: Collected) -> tuple[OpTime, ...]:
    ranked = sorted(collected.ops.items(), key=lambda item: (-item[1].self_ps, item[0]))
    return tuple(
        OpTime(terminal_text(name, NAME_LIMIT), terminal_text(where, NAME_LIMIT), kind,
               total.count, _ms(total.self_ps))
        for (where, kind, name), total in ranked[:MAX_OPS]
    )


def _streams(collected: Collected) -> tuple[StreamTime, ...]:
    return tuple(
        StreamTime(terminal_text(device, NAME_LIMIT), terminal_text(stream, NAME_LIMIT),
                   total.kernels, _ms(total.kernel_ps), total.copies, _ms(total.copy_ps))
        for (device, stream), total in sorted(collected.streams.items())[:MAX_STREAMS]
    )
