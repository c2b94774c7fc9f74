"""Fixtures for the dashboard's tests: apps built over fixed runs and telemetry, frozen clock."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from distcore.events.snapshots import RunSnapshot
from distcore.telemetry.samples import TelemetrySnapshot
from distmon.app import DistmonApp
from distmon.options import Options
from distmon.producers import Producers
from tests.kit.wait import until
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
        refresh: float = 0.5,
    ) -> DistmonApp:
        store = store or FixedRuns(standard_runs() if runs is None else runs)
        no_gpu = [telemetry([], reason="NVML library not found — no NVIDIA driver on this host")]
        made = Producers(store, None, sampler(snaps or no_gpu, HISTORY_TICKS))
        return DistmonApp(
            Options(logdirs=(logdir,), refresh=refresh), producers=lambda: made, clock=lambda: NOW
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


async def ready(pilot: Any, timeout: float = 20.0) -> None:
    """Wait until the app shows a snapshot of its job index (built off the UI thread)."""
    app = pilot.app

    def shown() -> bool:
        return (app.index is not None and app.dashboard.jobs is not None
                and app.dashboard.jobs is app.index.latest())

    await until(pilot, shown, "a job index snapshot on screen", timeout, every=0.02)
    await pilot.pause()


async def fresh(pilot: Any, timeout: float = 20.0) -> None:
    """A new snapshot now (after a change the index was not told about), and wait until shown."""
    await ready(pilot, timeout)
    pilot.app.index.refresh()
    await ready(pilot, timeout)


async def settle(pilot: Any) -> None:
    """Wait until the sampler thread took its one sample, then a fresh snapshot: identical
    screens every time."""
    await ready(pilot)
    sampler_ = pilot.app.producers.made.telemetry
    await until(pilot, lambda: sampler_.samples > HISTORY_TICKS, "the sampler's sample", 30.0,
                every=0.02)
    # the key bar follows the first rows
    await until(pilot, lambda: pilot.app.screen.query("FooterKey"), "the key bar's keys", 30.0,
                every=0.02)
    await fresh(pilot)


async def choose(pilot: Any, app: DistmonApp, key: str, name: str) -> None:
    """Press `key`, then pick `name` (as shown) from the command palette it opens."""
    from textual.command import CommandList, CommandPalette

    await pilot.press(key)

    def offered() -> bool:
        if not isinstance(app.screen, CommandPalette):
            return False
        listed = app.screen.query_one(CommandList)
        names = [_hit(listed, i) for i in range(listed.option_count)]
        if name in names:
            listed.highlighted = names.index(name)
        return name in names

    await until(pilot, offered, f"{name!r} offered after {key!r}")
    await pilot.press("enter")
    await until(pilot, lambda: not isinstance(app.screen, CommandPalette), "the palette to close")
    await pilot.pause()  # the palette runs the choice after it closes (call_later)


def _hit(listed: Any, i: int) -> str:
    return str(listed.get_option_at_index(i).hit.text)


def palette_names(app: DistmonApp) -> list[str | None]:
    from textual.command import Command, CommandList

    listed = app.screen.query_one(CommandList)
    names: list[str | None] = []
    for i in range(listed.option_count):
        option = listed.get_option_at_index(i)
        assert isinstance(option, Command), option  # the palette lists Commands alone
        names.append(option.hit.text)
    return names
