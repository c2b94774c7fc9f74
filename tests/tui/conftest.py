"""Fixtures for the dashboard's tests: apps built over fixed runs and telemetry, frozen clock."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from distcore.events.model import RunSnapshot
from distcore.telemetry.model import TelemetrySnapshot
from distmon.app import DistmonApp
from distmon.options import Options
from tests.tui.fixed import NOW, FixedRuns, gpu, keras_job, run, sampler, series, telemetry

MakeApp = Callable[..., DistmonApp]
HISTORY_TICKS = 60


def standard_runs() -> list[RunSnapshot]:
    """A healthy job, an input-bound one, and a lone run from another writer."""
    return [
        *keras_job("quickstart", wait=0.02),
        *keras_job("input_bound", wait=0.34),
        run("pytorch/exp1", series("Loss/train", [1.0 / (i + 1) for i in range(40)])),
    ]


@pytest.fixture
def make_app() -> MakeApp:
    def build(
        runs: Sequence[RunSnapshot] | None = None,
        snaps: Sequence[TelemetrySnapshot] | None = None,
        *,
        store: FixedRuns | None = None,
        logdir: Path = Path("/logs"),
    ) -> DistmonApp:
        store = store or FixedRuns(standard_runs() if runs is None else runs)
        no_gpu = [telemetry([], reason="NVML library not found — no NVIDIA driver on this host")]
        return DistmonApp(
            Options(logdirs=(logdir,), refresh=0.5),
            store=store,
            watcher=None,
            telemetry=sampler(snaps or no_gpu, HISTORY_TICKS),
            clock=lambda: NOW,
        )

    return build


def simulated_gpus(n: int = 2) -> list[TelemetrySnapshot]:
    """A minute of two simulated devices, the second nearly idle (imbalance) and full."""
    return [
        telemetry(
            [gpu(0, 80.0 + (i * 3) % 15, 40_000.0), gpu(1, 10.0 + (i * 5) % 20, 81_000.0)][:n],
            simulated=True,
        )
        for i in range(60)
    ]


async def settle(pilot: Any) -> None:
    """Wait until the sampler thread took its one sample, then redraw: identical screens."""
    sampler_ = pilot.app._telemetry
    for _ in range(100):
        if sampler_.samples > HISTORY_TICKS:
            break
        await pilot.pause(0.02)
    pilot.app.refresh_view()
    await pilot.pause()
