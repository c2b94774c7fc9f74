"""Smoothing matches TensorBoard's debiased EMA, checked against its closed form."""

from __future__ import annotations

import math

import pytest

from distcore.smoothing import adjust_weight, debiased_ema


def closed_form(values: list[float], weight: float) -> list[float]:
    """s_n = sum_i (1-w) w^(n-i) x_i / (1 - w^n): the EMA started at 0, divided by its bias."""
    out = []
    for n in range(1, len(values) + 1):
        acc = sum((1 - weight) * weight ** (n - i) * values[i - 1] for i in range(1, n + 1))
        out.append(acc / (1 - weight**n))
    return out


SERIES = [
    [2.3, 1.9, 1.7, 1.2, 1.1, 0.9, 0.95, 0.7],
    [0.1, 0.5, 0.2, 0.9, 0.4, 0.8],
    [10.0, -3.0, 4.5, 0.0, 7.25],
    [float(i % 7) for i in range(50)],
    [1e-6, 2e-6, 1.5e-6],
]


@pytest.mark.parametrize("weight", [0.0, 0.3, 0.6, 0.9, 0.99])
@pytest.mark.parametrize("values", SERIES)
def test_matches_the_closed_form(values: list[float], weight: float) -> None:
    assert debiased_ema(values, weight) == pytest.approx(closed_form(values, weight), rel=1e-9)


@pytest.mark.parametrize(
    ("values", "weight", "expected"),
    [
        ([4.0, 8.0], 0.5, [4.0, (0.5 * 0.5 * 4 + 0.5 * 8) / 0.75]),  # worked by hand
        ([1.0], 0.6, [1.0]),  # first point is never dragged towards 0
        ([3.0, 3.0, 3.0], 0.6, [3.0, 3.0, 3.0]),  # constant series untouched
        ([], 0.6, []),
    ],
)
def test_hand_worked_rows(values: list[float], weight: float, expected: list[float]) -> None:
    assert debiased_ema(values, weight) == pytest.approx(expected)


def test_non_finite_points_pass_through_and_do_not_poison_the_average() -> None:
    smoothed = debiased_ema([1.0, float("nan"), 3.0, float("inf")], 0.5)
    assert smoothed[0] == 1.0 and math.isnan(smoothed[1]) and math.isinf(smoothed[3])
    assert smoothed[2] == pytest.approx(closed_form([1.0, 3.0], 0.5)[1])


@pytest.mark.parametrize("weight", [-0.1, 1.0, 1.5])
def test_rejects_weights_outside_zero_to_one(weight: float) -> None:
    with pytest.raises(ValueError):
        debiased_ema([1.0, 2.0], weight)


@pytest.mark.parametrize(
    ("weight", "delta", "expected"),
    [(0.6, 0.1, 0.7), (0.6, -0.1, 0.5), (0.0, -0.1, 0.0), (0.95, 0.1, 0.99), (0.1, -0.1, 0.0)],
)
def test_adjust_weight_clamps(weight: float, delta: float, expected: float) -> None:
    assert adjust_weight(weight, delta) == expected
