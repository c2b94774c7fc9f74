"""Each alert rule, table-tested at the edges of its bands, on real RunSnapshot/GpuDevice facts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest

from distcore import alerts, names
from distcore.alerts import Alert, evaluate, keep_since
from distcore.events.model import Series
from distcore.snapshot import json_float
from tests.tui import fixed

NOW = 10_000.0


def series(tag: str, values: Sequence[float], *, interval: float = 1.0, end: float = NOW) -> Series:
    """One point a step, every `interval` seconds, the newest at `end`."""
    return fixed.series(tag, values, end=end, every=interval, step_every=1)


run = fixed.run


class Gpu:
    """The fields alerts read from a telemetry GpuDevice (index, utilization, memory)."""

    def __init__(
        self,
        index: int,
        util: float | None,
        used: float | None = 1000.0,
        total: float | None = 16000.0,
    ) -> None:
        self.index, self.utilization_gpu = index, util
        self.memory_used_mib, self.memory_total_mib = used, total


def kinds(found: Sequence[Alert]) -> list[tuple[str, str, str | None]]:
    return [(a.kind, a.severity, a.run) for a in found]


@pytest.mark.parametrize(
    ("fraction", "severity"),
    [
        (0.0, None),
        (0.0499, None),
        (0.05, "warning"),
        (0.12, "warning"),
        (0.1999, "warning"),
        (0.20, "critical"),
        (0.85, "critical"),
        (math.nan, None),
    ],
)
def test_input_stall_bands(fraction: float, severity: str | None) -> None:
    r = run("job/train", series(names.INPUT_WAIT_FRACTION, [0.01, 0.02, fraction]))
    found = [a for a in evaluate([r], [], now=NOW) if a.kind == "input_stall"]
    assert [a.severity for a in found] == ([severity] if severity else [])
    if severity:
        assert "input-bound" in found[0].message
        assert "prefetch" in found[0].message and "parallel" in found[0].message
        assert "cache" in found[0].message


def test_input_stall_since_is_the_start_of_the_stall() -> None:
    s = series(names.INPUT_WAIT_FRACTION, [0.01, 0.3, 0.25, 0.4], interval=5.0)
    alert = alerts.input_stall(run("j/train", s))
    assert alert is not None and alert.since == s.wall_times[1]


@pytest.mark.parametrize(
    ("values", "fires"),
    [
        ([2.0, 1.5, math.nan], True),
        ([2.0, 1.5, math.inf], True),
        ([2.0, 1.5, -math.inf], True),
        ([2.0, math.nan, 1.0], False),  # recovered: only the newest value counts
        ([2.0, 1.5, 1.0], False),
    ],
)
def test_loss_nan(values: list[float], fires: bool) -> None:
    found = kinds(evaluate([run("r", series("epoch_loss", values))], [], now=NOW))
    assert (("loss_nan", "critical", "r") in found) is fires


def _rising(rise: float, n: int = 30) -> list[float]:
    """Falls for n-20 points, then climbs linearly by `rise` (relative) over the last 20."""
    fall = [2.0 - 0.05 * i for i in range(n - alerts.RISING_WINDOW)]
    base = fall[-1]
    return fall + [base * (1 + rise * i / (alerts.RISING_WINDOW - 1)) for i in range(1, 21)]


@pytest.mark.parametrize(
    ("values", "fires"),
    [
        (_rising(0.5), True),
        (_rising(0.3), True),
        (_rising(0.02), False),  # rises, but by less than RISING_FRACTION
        ([2.0 - 0.05 * i for i in range(30)], False),  # falling
        ([1.0 + 0.3 * (-1) ** i for i in range(30)], False),  # noisy but flat
        (_rising(0.5)[-(alerts.RISING_WINDOW - 1) :], False),  # too few points to judge
    ],
)
def test_loss_rising(values: list[float], fires: bool) -> None:
    found = kinds(evaluate([run("r", series("loss", values))], [], now=NOW))
    assert (("loss_rising", "warning", "r") in found) is fires


@pytest.mark.parametrize(
    ("interval", "gap", "agent_status", "fires"),
    [
        (1.0, 5.0, None, False),  # a normal gap
        (1.0, 30.0, None, False),  # at the floor: STALL_MIN_SECONDS
        (1.0, 30.5, None, True),
        (10.0, 100.0, None, False),  # exactly STALL_FACTOR x interval
        (10.0, 101.0, None, True),
        (1.0, 601.0, None, False),  # long silent without run.json: an old, idle run
        (1.0, 601.0, "running", True),  # run.json says it should be writing
        (1.0, 100.0, "finished", False),
        (1.0, 100.0, "stopped", False),
    ],
)
def test_run_stalled(interval: float, gap: float, agent_status: str | None, fires: bool) -> None:
    r = run("j/train", series("loss", [1.0] * 10, interval=interval, end=NOW - gap))
    statuses = {"j/train": agent_status} if agent_status else None
    found = kinds(evaluate([r], [], now=NOW, agent_status=statuses))
    assert (("run_stalled", "warning", "j/train") in found) is fires


def test_gone_run_is_not_stalled() -> None:
    r = run("j/train", series("loss", [1.0] * 10, end=NOW - 100), status="gone")
    assert alerts.run_stalled(r, NOW) is None


@pytest.mark.parametrize(
    ("utils", "fires"),
    [
        ([95.0, 90.0], False),
        ([60.0, 30.0], False),  # spread exactly at the threshold
        ([60.0, 29.0], True),
        ([100.0, 95.0, 10.0], True),
        ([50.0, None], False),  # unknown is not zero
        ([5.0], False),
    ],
)
def test_gpu_imbalance(utils: list[float | None], fires: bool) -> None:
    gpus = [Gpu(i, u) for i, u in enumerate(utils)]
    found = kinds(evaluate([], gpus, now=NOW))
    assert (("gpu_imbalance", "warning", None) in found) is fires


@pytest.mark.parametrize(
    ("used", "total", "fires"),
    [
        (15000.0, 16000.0, False),
        (15199.0, 16000.0, False),
        (15200.0, 16000.0, True),
        (16000.0, 16000.0, True),
        (None, 16000.0, False),
        (100.0, None, False),
    ],
)
def test_gpu_memory_full(used: float | None, total: float | None, fires: bool) -> None:
    found = kinds(evaluate([], [Gpu(0, 90.0, used, total)], now=NOW))
    assert (("gpu_memory_full", "warning", None) in found) is fires


@pytest.mark.parametrize(
    ("utils", "has_wait_tag", "gap", "fires"),
    [
        ([10.0, 12.0], False, 1.0, True),
        ([29.0], False, 1.0, True),
        ([30.0], False, 1.0, False),  # at the threshold: not low
        ([10.0], True, 1.0, False),  # distagent measures input wait exactly: input_stall instead
        ([10.0], False, 1000.0, False),  # steps are not advancing: nothing to blame the input for
        ([None], False, 1.0, False),  # unknown utilization
        ([], False, 1.0, False),  # no GPU
    ],
)
def test_input_bound_suspected(
    utils: list[float | None], has_wait_tag: bool, gap: float, fires: bool
) -> None:
    many = [series("loss", [2.0 - 0.01 * i for i in range(10)], end=NOW - gap)]
    if has_wait_tag:
        many.append(series(names.INPUT_WAIT_FRACTION, [0.01] * 10, end=NOW - gap))
    gpus = [Gpu(i, u) for i, u in enumerate(utils)]
    found = kinds(evaluate([run("keras/train", *many)], gpus, now=NOW))
    assert (("input_bound_suspected", "warning", "keras/train") in found) is fires


def test_evaluate_orders_by_severity_and_serialises() -> None:
    runs = [
        run("a", series("loss", [1.0, math.nan])),
        run("b", series(names.INPUT_WAIT_FRACTION, [0.1, 0.1])),
    ]
    found = evaluate(runs, [Gpu(0, 99.0, 16000.0, 16000.0)], now=NOW)
    assert [a.severity for a in found] == ["critical", "warning", "warning"]
    doc = found[0].to_json()
    assert set(doc) == {"kind", "severity", "run", "message", "since"}


def test_keep_since_keeps_the_first_time_seen() -> None:
    old = Alert("gpu_imbalance", "warning", None, "x", 5.0)
    new = Alert("gpu_imbalance", "warning", None, "y", 9.0)
    other = Alert("loss_nan", "critical", "r", "z", 9.0)
    assert [a.since for a in keep_since([old], [new, other])] == [5.0, 9.0]


def _json_run(name: str, tag: str, value: float, wall: float, count: int = 5) -> dict[str, Any]:
    scalar = {
        "last_step": 4,
        "last_value": json_float(value),
        "last_wall_time": wall,
        "count": count,
        "min": 0.0,
        "max": 1.0,
    }
    return {"name": name, "status": "live", "scalars": {tag: scalar}}


def test_rules_run_on_once_json() -> None:
    runs = [
        alerts.run_from_json(_json_run("a", "loss", math.nan, NOW)),
        alerts.run_from_json(_json_run("b", names.INPUT_WAIT_FRACTION, 0.25, NOW)),
    ]
    gpus = [
        alerts.gpu_from_json(
            {
                "index": 0,
                "utilization_gpu": None,
                "memory_used_mib": 15900,
                "memory_total_mib": 16000,
            }
        )
    ]
    assert kinds(evaluate(runs, gpus, now=NOW)) == [
        ("loss_nan", "critical", "a"),
        ("input_stall", "critical", "b"),
        ("gpu_memory_full", "warning", None),
    ]
