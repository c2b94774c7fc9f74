"""A job's validation part judged against its own history and noise, never against training.

A validation loss is one evaluation per epoch (or per interval) on a held-out set that is often
small: on the demo's 256 images it swings between 1.5 and 5.5 while the training loss falls
smoothly, and it sits well above the training loss (a generalisation gap). The training rules'
margins (a loss spike at 3× the recent median, critical while it stays up; a rise over 20
points) read that as a model that lost its training, and flapped between warning and critical
on a healthy job. Whether training is lost is the training part's to say. Here a validation
loss spikes only against its whole kept history (the median and spread of every earlier
point, not the last twenty) and only by VALIDATION_SPIKE_FACTOR, an evaluation broken rather
than noisy; it is a warning, never critical; and a validation loss that rises while training
falls is the gap growing, information the charts show, not an alert.
"""

from __future__ import annotations

from typing import Final

from distcore.alerts import Alert, RunLike
from distcore.alerts.series import (
    LOSS_SPIKE_MIN_POINTS,
    LOSS_SPIKE_Z,
    TAIL_POINTS,
    loss_tag,
    tail_floats,
)
from distcore.alerts.spikes import Spike, window_spike

VALIDATION_SPIKE_FACTOR: Final = 10.0
VALIDATION_WINDOW: Final = TAIL_POINTS  # every kept point before it makes its reference
JUDGED_ELSEWHERE: Final = frozenset({"loss_spike", "loss_rising"})  # the training rules' own


def validation_alerts(alerts: list[Alert], run: RunLike) -> list[Alert]:
    """A validation part's point alerts: the training rules' loss spike and rise replaced by
    `validation_spike`; the others (a NaN loss, an input stall) kept."""
    kept = [a for a in alerts if a.kind not in JUDGED_ELSEWHERE]
    spike = validation_spike(run)
    return kept if spike is None else [*kept, spike]


def validation_spike(run: RunLike) -> Alert | None:
    """The newest validation loss far above its own history (a warning), or None."""
    tag = loss_tag(run.scalars)
    if tag is None:
        return None
    series = run.scalars[tag]
    values = tail_floats(series.values, TAIL_POINTS + VALIDATION_WINDOW)
    start = len(values) - TAIL_POINTS
    rule = (VALIDATION_WINDOW, LOSS_SPIKE_MIN_POINTS, LOSS_SPIKE_Z, VALIDATION_SPIKE_FACTOR)
    spike = _newest_spike(values, start, rule)
    if spike is None:
        return None
    # Named by the first point of its stretch: the points after a jump that stay up spike too.
    while spike.at > start and (earlier := window_spike(values, spike.at - 1, *rule)) is not None:
        spike = earlier
    value = values[spike.at]
    step = tail_floats(series.steps, len(values))[spike.at]
    since = tail_floats(series.wall_times, len(values))[spike.at]
    ratio = f"{value / spike.median:.3g}× its" if spike.median > 0 else "far above its"
    message = (f"validation loss spike: {tag} {value:.4g} at step {step} is {ratio} own median "
               f"{spike.median:.4g} (far outside its history: check the validation data and "
               "the model's inference mode)")
    return Alert("loss_spike", "warning", run.name, message, since)


def _newest_spike(
    values: list[float], start: int, rule: tuple[int, int, float, float]
) -> Spike | None:
    """The newest point at or after `start` that spikes over the window before it (a
    validation loss has a point an epoch: each is looked at)."""
    for at in range(len(values) - 1, max(start, rule[1]) - 1, -1):
        if (found := window_spike(values, at, *rule)) is not None:
            return found
    return None
