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
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from distcore import names
from distcore.alerts import Alert, RunLike
from distcore.bounded import perf_value

BUSY_UTILIZATION: Final = 90.0  # util% at or above which NVML calls a GPU busy
LOW_SM_ACTIVITY: Final = 50.0  # % of SMs busy below which a busy GPU is not computing
LOW_TENSOR_ACTIVITY: Final = 10.0  # % tensor-core activity, under mixed precision
MFU_RECENT_POINTS: Final = 3  # log points that make "now" (a median: one slow point is not it)
MFU_EARLIER_POINTS: Final = 5  # at least this many before them make "earlier"
MFU_DROP: Final = 0.5  # now below this share of earlier: "well below"
SHARE = "check the input pipeline, the collectives' share of the step and the batch size"


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
               f", below {MFU_DROP:.0%} of it: {SHARE}.")
    return Alert("mfu_dropped", "warning", run.name, message, now)


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
