"""The point rules and TensorBoard's EMA in their plain, one-run-at-a-time form, without the
job index's fast paths: the oracle that test_index_oracle compares
the fast rules with. Kept apart so that a later change to the rules cannot change the oracle."""

# ruff: noqa
from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from typing import Any

from distcore import names
from distcore.alerts import Alert, RunLike, SeriesLike
from distcore.alerts.cadence import BURST_GAP_SECONDS, STALL_MIN_SECONDS
from distcore.alerts.series import (
    LOSS_BACK_FACTOR, LOSS_BACK_Z, LOSS_SPIKE_FACTOR, LOSS_SPIKE_MIN_POINTS, LOSS_SPIKE_WINDOW,
    LOSS_SPIKE_Z, REMEDY, RISING_FRACTION, RISING_STEADY, RISING_WARMUP, RISING_WINDOW,
    SPIKE_FACTOR, SPIKE_MIN_POINTS, SPIKE_WINDOW, TAIL_POINTS, input_stall_severity,
)
from distcore.tags import pick_tag

DEFAULT_WEIGHT = 0.6


def debiased_ema(values: Sequence[float], weight: float = DEFAULT_WEIGHT) -> list[float]:
    """Smooth `values` with TensorBoard's debiased EMA; `weight` in [0, 1), 0 = no smoothing."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    if not values or all(v == values[0] for v in values):
        return list(values)
    smoothed = _ema(values, weight)
    if math.inf in smoothed or -math.inf in smoothed:  # an input, or an overflow: make sure
        return _bounded_ema(values, weight)
    return smoothed


def _ema(values: Sequence[float], weight: float) -> list[float]:
    last = 0.0
    accumulated = 0
    smoothed: list[float] = []
    for value in values:
        if not math.isfinite(value):
            smoothed.append(value)
            continue
        last = last * weight + (1.0 - weight) * value
        accumulated += 1
        smoothed.append(last / (1.0 - weight**accumulated))
    return smoothed


def _bounded_ema(values: Sequence[float], weight: float) -> list[float]:
    """The same, safe near the largest floats (1.7e308), where rounding in the sum or in the
    debiasing division would smooth a finite series to infinity: the average runs at half
    scale, and each output, a weighted mean of the finite values so far, is kept within their
    range."""
    last = 0.0
    accumulated = 0
    low, high = math.inf, -math.inf
    smoothed: list[float] = []
    for value in values:
        if not math.isfinite(value):
            smoothed.append(value)
            continue
        low, high = min(low, value), max(high, value)
        last = last * weight + (1.0 - weight) * (value * 0.5)
        accumulated += 1
        mean = last / (1.0 - weight**accumulated) * 2.0
        smoothed.append(min(high, max(low, mean)))
    return smoothed


def _tail(values: Sequence[Any], n: int) -> Sequence[Any]:
    """The newest n items: rules look at a series' tail only, so their cost does not grow with
    the points kept (2,000 per series by default)."""
    return values[-n:] if len(values) > n else values


def _trailing_since(series: SeriesLike, holds: Any) -> float:
    """Wall time of the first point of the newest unbroken stretch where `holds(value)`, looked
    for in the tail (an older start is kept by `keep_since` while the alert persists)."""
    since = series.last_wall_time
    values, walls = _tail(series.values, TAIL_POINTS), _tail(series.wall_times, TAIL_POINTS)
    for value, wall in zip(reversed(values), reversed(walls), strict=False):
        if not holds(value):
            break
        since = wall
    return since


def _fraction(value: float) -> float | None:
    """perf/input_wait_fraction's documented range: a point outside 0-1 is unknown."""
    return value if 0.0 <= value <= 1.0 else None


def input_stall(run: RunLike) -> Alert | None:
    series = run.scalars.get(names.INPUT_WAIT_FRACTION)
    if series is None:
        return None
    severity = input_stall_severity(_fraction(series.last_value))
    if severity is None:
        return None
    level = "highly" if severity == "critical" else "moderately"
    message = (
        f"Your program is {level} input-bound: {series.last_value:.0%} of the step time is spent "
        f"waiting for input. Recommendation: {REMEDY}."
    )
    since = _trailing_since(series, lambda v: input_stall_severity(_fraction(v)) is not None)
    return Alert("input_stall", severity, run.name, message, since)


def loss_nan(run: RunLike) -> Alert | None:
    tag = pick_tag(run.scalars, "loss")
    if tag is None:
        return None
    series = run.scalars[tag]
    if math.isfinite(series.last_value):
        return None
    since = _trailing_since(series, lambda v: not math.isfinite(v))
    step = f" at step {series.steps[-1]}" if series.steps else ""
    message = f"{tag} is {series.last_value}{step} — training diverged (lower the learning rate?)"
    return Alert("loss_nan", "critical", run.name, message, since)


def loss_rising(run: RunLike) -> Alert | None:
    """A smoothed loss that climbs steadily over its last RISING_WINDOW points.

    The EMA starts RISING_WARMUP points before the window: with the default weight 0.6 the
    start's influence is 0.6**40 ≈ 1e-9 by the window, so the tail gives the whole curve's
    smoothed values at a fixed cost."""
    tag = pick_tag(run.scalars, "loss")
    if tag is None:
        return None
    series = run.scalars[tag]
    values = _tail(series.values, RISING_WINDOW + RISING_WARMUP)
    if len(values) < RISING_WINDOW or not all(map(math.isfinite, values)):
        return None
    window = debiased_ema(values)[-RISING_WINDOW:]
    low = min(window)
    low_at = window.index(low)
    rise = window[-1] - low
    ups = sum(b > a for a, b in itertools.pairwise(window))
    if rise <= RISING_FRACTION * max(abs(low), 1e-12) or ups < RISING_STEADY * (len(window) - 1):
        return None
    since = series.wall_times[len(series.wall_times) - RISING_WINDOW + low_at]
    message = (
        f"{tag} rising steadily: {low:.4g} -> {window[-1]:.4g} over the last {RISING_WINDOW} "
        "points (divergence? check the learning rate)"
    )
    return Alert("loss_rising", "warning", run.name, message, since)


def gradient_spike(run: RunLike) -> Alert | None:
    """The newest gradient norm in the tail above SPIKE_FACTOR × the median of the SPIKE_WINDOW
    points before it: a warning that often comes before a NaN (clip, or lower the rate)."""
    series = run.scalars.get(names.GRAD_NORM)
    if series is None:
        return None
    values = list(_tail(series.values, TAIL_POINTS + SPIKE_WINDOW))
    walls, steps = _tail(series.wall_times, len(values)), _tail(series.steps, len(values))
    for i in range(len(values) - 1, max(SPIKE_MIN_POINTS, len(values) - TAIL_POINTS) - 1, -1):
        before = [v for v in values[max(0, i - SPIKE_WINDOW):i] if math.isfinite(v)]
        if len(before) < SPIKE_MIN_POINTS:
            continue
        median = statistics.median(before)
        value = values[i]
        if median > 0 and math.isfinite(value) and value > SPIKE_FACTOR * median:
            message = (f"gradient spike: {names.GRAD_NORM} {value:.4g} at step {steps[i]} is "
                       f"{value / median:.0f}× its recent median {median:.4g} (divergence ahead? "
                       "set optimizer.clip_norm or lower the learning rate)")
            return Alert("gradient_spike", "warning", run.name, message, walls[i])
    return None


def _stands_out(value: float, median: float, deviation: float, z: float, factor: float) -> bool:
    margin = max(z * deviation, (factor - 1.0) * abs(median), 1e-12)
    return not math.isfinite(value) or value - median > margin


def _loss_spike_at(values: Sequence[float], i: int) -> tuple[float, float] | None:
    value = values[i]
    before = [v for v in values[max(0, i - LOSS_SPIKE_WINDOW):i] if math.isfinite(v)]
    if not math.isfinite(value) or len(before) < LOSS_SPIKE_MIN_POINTS:
        return None
    median = statistics.median(before)
    deviation = 1.4826 * statistics.median([abs(v - median) for v in before])
    if not _stands_out(value, median, deviation, LOSS_SPIKE_Z, LOSS_SPIKE_FACTOR):
        return None
    return median, deviation


def loss_spikes(steps: Sequence[int], values: Sequence[float]) -> list[tuple[int, int | None]]:
    """Every stretch of spiking points over the whole series, each with its first point's index
    and the index of the first later point back within the rule's margin (None: never)."""
    spiking = [_loss_spike_at(values, i) is not None for i in range(len(values))]
    out = []
    for i, spikes in enumerate(spiking):
        if spikes and (i == 0 or not spiking[i - 1]):
            median, deviation = _loss_spike_at(values, i)  # type: ignore[misc]
            back = next((j for j in range(i + 1, len(values)) if steps[j] > steps[i] and
                         not _stands_out(values[j], median, deviation, LOSS_BACK_Z,
                                         LOSS_BACK_FACTOR)), None)
            out.append((i, back))
    return out


def loss_spike(run: RunLike) -> Alert | None:
    """Every point of the series with its own median and MAD: its stretches of spikes, the
    newest judged by where the loss is now, the earlier (the newest 16 kept) by whether they
    ever came back."""
    tag = pick_tag(tuple(run.scalars), "loss")
    if tag is None:
        return None
    series = run.scalars[tag]
    values, steps, walls = list(series.values), list(series.steps), list(series.wall_times)
    stretches = loss_spikes(steps, values)
    if not stretches:
        return None
    count, stretches = len(stretches), stretches[-16:]
    i, _ = stretches[-1]
    median, deviation = _loss_spike_at(values, i)  # type: ignore[misc]
    last = len(values) - 1
    value, now = values[i], values[last]
    last_spiked = _loss_spike_at(values, last) is not None
    ratio = f"{value / median:.3g}× its" if median > 0 else "far above its"
    what = f"loss spike: {tag} {value:.4g} at step {steps[i]} is {ratio} recent median {median:.4g}"
    if i == last:
        severity, message = "warning", (
            f"{what} (if it does not come back, lower the learning rate or clip)")
    elif last_spiked or _stands_out(now, median, deviation, LOSS_BACK_Z, LOSS_BACK_FACTOR):
        severity, message = "critical", (
            f"{what} and has not come back (now {now:.4g}): the model may have lost its "
            "training; lower the learning rate, clip, or resume from a checkpoint")
    else:
        severity, message = "warning", f"{what}; it recovered by itself (now {now:.4g})"
    earlier = stretches[:-1]
    if earlier:
        if any(back is None for _, back in earlier):
            severity = "critical"
        told = []
        for j, back in reversed(earlier[-3:]):
            before, _ = _loss_spike_at(values, j)  # type: ignore[misc]
            came = f"recovered at step {steps[back]}" if back is not None else "has not come back"
            told.append(f"loss spiked at step {steps[j]} ({before:.3g}→{values[j]:.3g}), {came}")
        more = count - 1 - len(told)
        message += "; earlier: " + "; ".join(told) + (f"; and {more} more" if more > 0 else "")
    return Alert("loss_spike", severity, run.name, message, walls[i])  # type: ignore[arg-type]


def series_alerts(run: RunLike) -> list[Alert]:
    """The rules that depend only on a run's points: computed again only when the run changed."""
    found = [input_stall(run), loss_nan(run), loss_rising(run), gradient_spike(run),
             loss_spike(run)]
    return [a for a in found if a is not None]


def usual_interval(run: RunLike) -> float | None:
    """The run's cadence in seconds: how often its densest series gets a point, or None when
    that is not meaningful (fewer than 3 points, or everything written within STALL_MIN_SECONDS:
    a burst writer that logged its whole history at once has no cadence to fall behind).

    It is the median gap between the tail's points; a writer that logs in bursts (many points at
    almost the same time, then a pause) has a median gap near zero, so there the cadence is the
    median of the pauses between bursts."""
    best = max(run.scalars.values(), key=lambda s: s.count, default=None)
    if best is None or best.count < 3 or len(best.wall_times) < 3:
        return None
    if best.last_wall_time - best.wall_times[0] < STALL_MIN_SECONDS:
        return None
    walls = _tail(best.wall_times, TAIL_POINTS)
    gaps = [b - a for a, b in itertools.pairwise(walls) if math.isfinite(b - a) and b >= a]
    if not gaps:
        return None
    typical = statistics.median(gaps)
    if typical >= BURST_GAP_SECONDS:
        return typical
    pauses = [g for g in gaps if g >= BURST_GAP_SECONDS]
    return statistics.median(pauses) if len(pauses) >= 2 else typical or None
