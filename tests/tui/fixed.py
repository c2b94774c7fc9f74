"""Fixed data for the dashboard's tests: real RunSnapshot/TelemetrySnapshot objects, built here.

A `FixedRuns` store hands out the snapshots it was given and lets a test push new ones (its
subscribers are called as the watcher would call them); `FixedSource` feeds a real
TelemetrySampler with prepared snapshots. A frozen clock keeps snapshot tests deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from distcore import names
from distcore.events.snapshots import RunSnapshot, Series
from distcore.location import RunLocation
from distcore.telemetry.sampler import TelemetrySampler
from distcore.telemetry.samples import (
    GpuDevice,
    GpuStatus,
    HostSample,
    TelemetrySnapshot,
)

NOW = 1_760_000_000.0


def series(
    tag: str,
    values: Sequence[float],
    *,
    end: float = NOW - 1,
    every: float = 2.0,
    step_every: int = 10,
) -> Series:
    """Points every `every` seconds and `step_every` steps, the newest written at `end`."""
    n = len(values)
    walls = tuple(end - every * (n - 1 - i) for i in range(n))
    finite = [v for v in values if math.isfinite(v)] or [math.nan]
    return Series(
        tag=tag,
        steps=tuple(step_every * i for i in range(len(values))),
        values=tuple(values),
        wall_times=walls,
        last_step=step_every * (len(values) - 1),
        last_value=values[-1],
        last_wall_time=walls[-1],
        count=len(values),
        min=min(finite),
        max=max(finite),
    )


def run(name: str, *many: Series, status: str = "live", root: Path = Path("/logs")) -> RunSnapshot:
    return RunSnapshot(
        name=name,
        path=RunLocation.on_this_machine(root / name),
        status=status,  # type: ignore[arg-type]
        files=1,
        problems=(),
        hparams={},
        scalars={s.tag: s for s in many},
        last_update=max((s.last_wall_time for s in many), default=None),
        # As the store reads it: the file last written with its newest point.
        last_modified=max((s.last_wall_time for s in many), default=None),
    )


def falling(n: int, start: float = 2.3, floor: float = 0.2, wiggle: float = 0.05) -> list[float]:
    return [
        floor + (start - floor) * math.exp(-i / (n / 4)) + wiggle * math.sin(i) for i in range(n)
    ]


def rising(n: int, start: float = 0.1, top: float = 0.95) -> list[float]:
    return [top - (top - start) * math.exp(-i / (n / 4)) + 0.01 * math.cos(i) for i in range(n)]


def keras_job(
    name: str,
    n: int = 60,
    *,
    wait: float | None = None,
    root: Path = Path("/logs"),
    status: str = "live",
) -> list[RunSnapshot]:
    train = [series("epoch_loss", falling(n)), series("epoch_accuracy", rising(n))]
    if wait is not None:
        train += [
            series(names.INPUT_WAIT_FRACTION, [wait] * n),
            series(names.EXAMPLES_PER_SECOND, [1234.0] * n),
        ]
    validation = [
        series("epoch_loss", falling(n, 2.4, 0.3)),
        series("epoch_accuracy", rising(n, 0.1, 0.9)),
    ]
    return [
        run(f"{name}/train", *train, status=status, root=root),
        run(f"{name}/validation", *validation, status=status, root=root),
    ]


class FixedRuns:
    """A run source with fixed snapshots; `replace` swaps them and notifies like the store."""

    def __init__(self, runs: Sequence[RunSnapshot]) -> None:
        self._runs = tuple(sorted(runs, key=lambda r: r.name))
        self._subscribers: list[Callable[[frozenset[str]], None]] = []

    def snapshot(self) -> tuple[RunSnapshot, ...]:
        return self._runs

    def get(self, name: str) -> RunSnapshot | None:
        return next((r for r in self._runs if r.name == name), None)

    def subscribe(self, callback: Callable[[frozenset[str]], None]) -> Callable[[], None]:
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback)

    def replace(self, runs: Sequence[RunSnapshot]) -> None:
        self._runs = tuple(sorted(runs, key=lambda r: r.name))
        for callback in list(self._subscribers):
            callback(frozenset(r.name for r in runs))


def gpu(index: int, util: float, used: float, total: float = 81920.0) -> GpuDevice:
    return GpuDevice(
        index=index,
        name="NVIDIA A100-SXM4-80GB",
        uuid=f"GPU-{index}",
        utilization_gpu=util,
        utilization_memory=util / 2,
        memory_used_mib=used,
        memory_total_mib=total,
        temperature_c=40 + util / 4,
        power_w=60 + util * 3,
        power_limit_w=400.0,
        sm_clock_mhz=1410.0,
        fan_percent=None,
        pcie_rx_kib_s=None,
        pcie_tx_kib_s=None,
        processes=(),
    )


HOST = HostSample(
    cpu_percent=37.0,
    per_core=(30.0, 44.0),
    load_avg=(1.2, 1.0, 0.8),
    memory_used_mib=12_000.0,
    memory_total_mib=64_000.0,
)


def telemetry(
    devices: Sequence[GpuDevice], *, reason: str | None = None, simulated: bool = False
) -> TelemetrySnapshot:
    status = GpuStatus(available=bool(devices), reason=reason, simulated=simulated)
    return TelemetrySnapshot(time=NOW, status=status, devices=tuple(devices), host=HOST)


class FixedSource:
    """A telemetry source that returns prepared snapshots in turn (the last one repeats)."""

    def __init__(self, snaps: Sequence[TelemetrySnapshot]) -> None:
        self._snaps = list(snaps)
        self._i = 0

    def sample(self) -> TelemetrySnapshot:
        snap = self._snaps[min(self._i, len(self._snaps) - 1)]
        self._i += 1
        return snap

    def close(self) -> None:
        pass


def sampler(snaps: Sequence[TelemetrySnapshot], history: int = 60) -> TelemetrySampler:
    """A real sampler, filled with `history` ticks of `snaps` and never started as a thread."""
    s = TelemetrySampler(FixedSource(snaps), interval=1.0, wait=lambda _: True)
    for _ in range(history):
        s.sample_once()
    return s


def system_run(
    job: str, worker: int, *, host: str | None = None, gpus: int = 2, end: float = NOW - 1
) -> RunSnapshot:
    """`<job>/system/worker-<i>` as distagent's recorder writes it: a point every 5 s per GPU
    field and host figure, with the recorder's `host`/`worker` hparams when `host` is given."""
    many = [
        series(names.gpu_tag(i, "utilization"), [40.0 + 10 * i + worker] * 12, end=end, every=5.0)
        for i in range(gpus)
    ]
    many += [
        series(names.gpu_tag(i, "memory_used_mib"), [30_000.0] * 12, end=end, every=5.0)
        for i in range(gpus)
    ]
    many.append(series(names.HOST_CPU_PERCENT, [55.0] * 12, end=end, every=5.0))
    many.append(series(names.HOST_MEMORY_USED_MIB, [8192.0] * 12, end=end, every=5.0))
    snap = run(f"{job}/system/worker-{worker}", *many)
    hparams = {"host": host, "worker": worker} if host is not None else {}
    return RunSnapshot(**{**snap.__dict__, "hparams": hparams})
