"""The efficiency rules: GPUs busy but not computing, and MFU fallen below the job's own level.

util% counts a GPU busy while any kernel runs; NVML GPM says what it did meanwhile (see
distcore.telemetry.gpm). A job whose GPUs read util >= 90 % while their SMs (or, under mixed
precision, their tensor cores) are mostly idle waits on memory, a collective or its input with
a kernel resident. Each GPM figure is already a mean over its sample interval (1 s on this
machine, the recorder's interval for a worker), so one low reading is a second of it, not a
spike.

MFU (perf/mfu, written by distagent at every log point) falling well below the job's own
earlier level says the same from the other side, on any hardware: compared with the job's own
past rather than an absolute bar, since a small model's good MFU is a large one's poor one.
Its advice follows the run's own input wait: the input pipeline is named only where the share
of the step spent waiting for input rose with the fall; otherwise the step's other parts are
(a straggler or slower collectives, whose own alerts name them, or the batch size).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from distcore import names
from distcore.alerts import Alert, RunLike
from distcore.alerts.series import REMEDY, TAIL_POINTS, tail_floats
from distcore.bounded import perf_value

BUSY_UTILIZATION: Final = 90.0  # util% at or above which NVML calls a GPU busy
LOW_SM_ACTIVITY: Final = 50.0  # % of SMs busy below which a busy GPU is not computing
LOW_TENSOR_ACTIVITY: Final = 10.0  # % tensor-core activity, under mixed precision
MFU_RECENT_POINTS: Final = 3  # log points that make "now" (a median: one slow point is not it)
MFU_EARLIER_POINTS: Final = 5  # at least this many before them make "earlier"
MFU_DROP: Final = 0.5  # now below this share of earlier: "well below"
SHARE = "check the input pipeline, the collectives' share of the step and the batch size"
INPUT_ROSE: Final = names.INPUT_WAIT_MODERATE  # input wait up by this share of the step, and
# at least this share now: the fall is the input's
NOT_INPUT = "check the workers' step times (a straggler) and the collectives' share of the step"


class GpmLike(Protocol):
    @property
    def index(self) -> int: ...
    @property
    def utilization_gpu(self) -> float | None: ...
    @property
    def sm_activity(self) -> float | None: ...
    @property
    def tensor_activity(self) -> float | None: ...


def _idle_work(gpu: GpmLike, mixed_precision: bool) -> tuple[str, float] | None:
    """(what is idle, its figure) for a busy GPU whose SMs or tensor cores are idle."""
    util = gpu.utilization_gpu
    if util is None or util < BUSY_UTILIZATION:
        return None
    if gpu.sm_activity is not None and gpu.sm_activity < LOW_SM_ACTIVITY:
        return "SM activity", gpu.sm_activity
    tensor = gpu.tensor_activity
    if mixed_precision and tensor is not None and tensor < LOW_TENSOR_ACTIVITY:
        return "tensor-core activity", tensor
    return None


def busy_not_computing(
    gpus: Sequence[GpmLike], now: float, run: str | None, *, mixed_precision: bool = False,
    where: str = "",
) -> Alert | None:
    """One alert for the job's GPUs that read busy while computing little, with each GPU's
    util% and the GPM figure that shows it; None where any figure is unknown (before Hopper)."""
    found = [(g, idle) for g in gpus if (idle := _idle_work(g, mixed_precision)) is not None]
    if not found:
        return None
    figures = ", ".join(f"GPU {g.index} util {g.utilization_gpu:.0f}% with {what} {value:.0f}%"
                        for g, (what, value) in found)
    bar = (f"tensor-core activity < {LOW_TENSOR_ACTIVITY:.0f}%" if mixed_precision
           else f"SM activity < {LOW_SM_ACTIVITY:.0f}%")
    message = (f"GPUs{where} busy but not computing: {figures} (util >= "
               f"{BUSY_UTILIZATION:.0f}% counts any resident kernel; {bar} is idle work). "
               f"The step waits on memory, a collective or input: {SHARE}.")
    return Alert("busy_not_computing", "warning", run, message, now)


def mfu_dropped(run: RunLike, now: float) -> Alert | None:
    """MFU's median over the last few log points against its median over all those before,
    once there are enough of both; the message gives both, with their steps."""
    series = run.scalars.get(names.MFU)
    if series is None or series.count < MFU_RECENT_POINTS + MFU_EARLIER_POINTS:
        return None
    values, steps = series.values, series.steps
    recent_values = [v for v in values[-MFU_RECENT_POINTS:] if _mfu(v) is not None]
    earlier_values = [v for v in values[:-MFU_RECENT_POINTS] if _mfu(v) is not None]
    if len(recent_values) < MFU_RECENT_POINTS or len(earlier_values) < MFU_EARLIER_POINTS:
        return None
    recent, earlier = statistics.median(recent_values), statistics.median(earlier_values)
    if earlier <= 0 or recent >= MFU_DROP * earlier:
        return None
    first_recent = steps[-MFU_RECENT_POINTS]
    message = (f"MFU fell to {recent:.1%} (median of steps {first_recent}-{steps[-1]}) from "
               f"the job's own {earlier:.1%} (steps {steps[0]}-{steps[-MFU_RECENT_POINTS - 1]})"
               f", below {MFU_DROP:.0%} of it{_advice(run, first_recent)}.")
    return Alert("mfu_dropped", "warning", run.name, message, now)


def input_wait_rise(run: RunLike, since_step: int) -> tuple[float, float] | None:
    """(before, now): the medians of the run's input wait share of the step before
    `since_step` and from it, where both are known, over its tail; None without them."""
    series = run.scalars.get(names.INPUT_WAIT_FRACTION)
    if series is None:
        return None
    before: list[float] = []
    after: list[float] = []
    steps = tail_floats(series.steps, TAIL_POINTS)
    values = tail_floats(series.values, len(steps))
    for step, value in zip(steps, values, strict=True):
        share = perf_value(names.INPUT_WAIT_FRACTION, value)  # 0-1, else unknown
        if share is not None:
            (after if step >= since_step else before).append(share)
    if not before or not after:
        return None
    return statistics.median(before), statistics.median(after)


def _advice(run: RunLike, since_step: int) -> str:
    """What to check, by what the input wait did while MFU fell."""
    rise = input_wait_rise(run, since_step)
    if rise is None:
        return f": {NOT_INPUT}"
    before, now = rise
    if now >= INPUT_ROSE and now - before >= INPUT_ROSE:
        return (f", while the input wait rose from {before:.0%} to {now:.0%} of the step: "
                f"check the input pipeline ({REMEDY})")
    return f"; the input wait did not rise ({before:.0%} -> {now:.0%} of the step): {NOT_INPUT}"


def job_mfu(parts: Mapping[str, RunLike]) -> float | None:
    """A job's newest MFU: its train part's, else any training part's that has one."""
    order = sorted(parts, key=lambda p: p != names.TRAIN_DIR)
    for part in order:
        series = parts[part].scalars.get(names.MFU)
        if series is not None and series.count:
            return _mfu(series.last_value)
    return None


def _mfu(value: float) -> float | None:
    """A point of perf/mfu within its range (0-1), else unknown: never exported, shown or
    compared outside it."""
    return perf_value(names.MFU, value)
