"""A job's cost as one line (`--once`, the details panel): every figure or its reason."""

from __future__ import annotations

import pytest

from distcore.jobs.cost import NO_COUNTER, NO_GPUS, NO_PRICE, JobCost
from distmon.render.cost import amount, cost_line, money


def cost(gpus: int | None = 8, hours: float | None = 41.2, kwh: float | None = 38.0,
         paid: float | None = 98.0, not_compute: float | None = 0.62,
         **why: str) -> JobCost:
    return JobCost(gpus, hours, {}, kwh, paid, not_compute, why)


@pytest.mark.parametrize(("made", "line"), [
    (cost(), "41.2 GPU-hours (8 GPUs), 38.0 kWh, $98.00; 62% of it was not compute"),
    (cost(gpus=1, hours=0.0123, kwh=None, paid=0.03, energy=NO_COUNTER),
     f"0.0123 GPU-hours (1 GPU), energy – ({NO_COUNTER}), $0.03; 62% of it was not compute"),
    (cost(gpus=0, hours=None, kwh=0.5, paid=None, gpu_hours=NO_GPUS, money=NO_PRICE),
     f"GPU-hours – ({NO_GPUS}), 0.5 kWh, money – ({NO_PRICE})"),
    (cost(hours=1234.5, kwh=2.0, paid=1234.5, not_compute=None),
     "1,234 GPU-hours (8 GPUs), 2 kWh, $1,234.50"),
])
def test_cost_line(made: JobCost, line: str) -> None:
    assert cost_line(made) == line


@pytest.mark.parametrize(("value", "text"), [
    (0.0, "0"), (0.004567, "0.00457"), (4.567, "4.57"), (41.25, "41.2"), (150.4, "150"),
    (1e6, "1,000,000"),
])
def test_amount(value: float, text: str) -> None:
    assert amount(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (0.0, "$0.00"), (0.0012, "$0.0012"), (98.0, "$98.00"), (1234.5, "$1,234.50"),
])
def test_money(value: float, text: str) -> None:
    assert money(value) == text
