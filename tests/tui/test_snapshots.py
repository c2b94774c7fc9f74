"""SVG snapshots of the main screen with fixed data and a frozen clock.

Update after a deliberate change of the look: `pytest tests/tui/test_snapshots.py --snapshot-update`
and review the SVGs (pytest prints a report to compare them side by side).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.tui.conftest import MakeApp, settle, simulated_gpus, standard_runs
from tests.tui.fixed import gpu, keras_job, run, series, telemetry

SIZES = [(80, 24), (160, 48)]


def healthy_runs() -> list[Any]:
    return [
        *keras_job("quickstart", wait=0.02),
        run("pytorch/exp1", series("Loss/train", [1.0 / (i + 1) for i in range(40)])),
    ]


def balanced_gpus() -> list[Any]:
    return [
        telemetry([gpu(i, 85.0 + (t + 3 * i) % 10, 30_000.0) for i in range(4)], simulated=True)
        for t in range(60)
    ]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_no_gpu(snap_compare: Any, make_app: MakeApp, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(healthy_runs()), terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_simulated_gpus(snap_compare: Any, make_app: MakeApp, size: tuple[int, int]) -> None:
    assert snap_compare(
        make_app(healthy_runs(), balanced_gpus()), terminal_size=size, run_before=settle
    )


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_with_alerts(snap_compare: Any, make_app: MakeApp, size: tuple[int, int]) -> None:
    runs = [*standard_runs(), run("diverged", series("loss", [1.0, 0.9, 1.4, 8.0, math.nan]))]
    assert snap_compare(
        make_app(runs, simulated_gpus()),
        press=["space", "j", "j", "space"],
        terminal_size=size,
        run_before=settle,
    )


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_other_hosts(snap_compare: Any, make_app: MakeApp, size: tuple[int, int]) -> None:
    """The local GPUs, then each worker of a two-worker job (one of them stale)."""
    from tests.tui.test_app import two_worker_job

    assert snap_compare(
        make_app(two_worker_job(), balanced_gpus()), terminal_size=size, run_before=settle
    )
