"""The rules over a run's points: input stall, NaN loss, a loss that rises or spikes, a gradient
spike.

They depend only on a run's series, so the job index computes them again only for runs that
changed; each looks at a series' tail only, so its cost does not grow with the points kept (the
loss-spike rule reads the history the store's tracker kept over every point read).
distcore.tails runs the same rules over many runs' numpy tails at once.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Final

from distcore import names
from distcore.alerts import Alert, RunLike, SeriesLike, Severity
from distcore.alerts.spikes import SpikeHistory, SpikeRule, SpikeSeen, spike_history
from distcore.bounded import perf_value
from distcore.smoothing import DEFAULT_WEIGHT, debiased_ema
from distcore.tags import pick_tag

RISING_WINDOW: Final = 20  # points of loss looked at for divergence
RISING_FRACTION: Final = 0.10  # smoothed loss above its window minimum by this much
RISING_STEADY: Final = 0.7  # share of the smoothed steps that go up
RISING_WARMUP: Final = 40  # points before the window that the EMA starts from
TAIL_POINTS: Final = 64  # points of a series' tail the cadence and "since" look at
SPIKE_FACTOR: Final = 10.0  # a gradient norm this many times its recent median is a spike
SPIKE_WINDOW: Final = 20  # points before a gradient norm that make its recent median
SPIKE_MIN_POINTS: Final = 5  # fewer points before it: no median to speak of
LOSS_SPIKE_WINDOW: Final = 20  # points before a loss that make its recent median and MAD
LOSS_SPIKE_MIN_POINTS: Final = 5
LOSS_SPIKE_FACTOR: Final = 3.0  # a loss above 3× its recent median (for a positive loss) ...
LOSS_SPIKE_Z: Final = 10.0  # ... and above it by 10 robust deviations (MAD × 1.4826)
LOSS_BACK_FACTOR: Final = 1.5  # back within 1.5× the median before the spike ...
LOSS_BACK_Z: Final = 3.0  # ... or within 3 deviations of it: the spike recovered
LOSS_SPIKE_RULE: Final = SpikeRule(LOSS_SPIKE_WINDOW, LOSS_SPIKE_MIN_POINTS, LOSS_SPIKE_Z,
                                   LOSS_SPIKE_FACTOR, LOSS_BACK_Z, LOSS_BACK_FACTOR)
REMEDY: Final = (
    "use parallel map (num_parallel_calls=AUTOTUNE), prefetch, and cache the dataset if it fits"
)


def input_stall_severity(fraction: float | None) -> Severity | None:
    """The TF profiler's bands: under 5% fine, 5-20% moderately, 20% or more highly input-bound.
    None (unknown, or outside 0-1: see `input_wait`) raises nothing."""
    if fraction is None or fraction < names.INPUT_WAIT_MODERATE:
        return None
    return "critical" if fraction >= names.INPUT_WAIT_HIGH else "warning"


def _tail(values: Sequence[Any], n: int) -> Sequence[Any]:
    """The newest n items: rules look at a series' tail only, so their cost does not grow with
    the points kept (2,000 per series by default)."""
    return values[-n:] if len(values) > n else values


def tail_floats(values: Sequence[Any], n: int) -> list[Any]:
    """The newest n items as a list of Python numbers, the items `_tail` holds: a store's
    Column converts in one call (reading it item by item was most of the rules' time on a
    sweep of 10,000 small runs)."""
    tail = _tail(values, n)
    tolist = getattr(tail, "tolist", None)
    return tolist() if tolist is not None else list(tail)


_LOSS_TAGS: dict[tuple[str, ...], str | None] = {}
_LOSS_TAGS_KEPT: Final = 4096


def loss_tag(scalars: Mapping[str, Any]) -> str | None:
    """`pick_tag(scalars, "loss")`, remembered per set of tags: a sweep's runs share theirs,
    and three rules ask it of every run."""
    key = tuple(scalars)
    found = _LOSS_TAGS.get(key, "")
    if found != "":
        return found
    if len(_LOSS_TAGS) >= _LOSS_TAGS_KEPT:
        _LOSS_TAGS.clear()
    found = _LOSS_TAGS[key] = pick_tag(key, "loss")
    return found


def _trailing_since(series: SeriesLike, holds: Any) -> float:
    """Wall time of the first point of the newest unbroken stretch where `holds(value)`, looked
    for in the tail (an older start is kept by `keep_since` while the alert persists)."""
    since = series.last_wall_time
    values = tail_floats(series.values, TAIL_POINTS)
    walls = tail_floats(series.wall_times, TAIL_POINTS)
    for value, wall in zip(reversed(values), reversed(walls), strict=False):
        if not holds(value):
            break
        since = wall
    return since


def input_wait(value: float) -> float | None:
    """A point of perf/input_wait_fraction within its range (0-1), else unknown."""
    return perf_value(names.INPUT_WAIT_FRACTION, value)


def input_stall(run: RunLike, advice: str = REMEDY) -> Alert | None:
    """`advice`: what to do, where the job's pipeline is known (distcore.alerts.input_advice)."""
    series = run.scalars.get(names.INPUT_WAIT_FRACTION)
    if series is None:
        return None
    fraction = input_wait(series.last_value)
    severity = input_stall_severity(fraction)
    if severity is None:
        return None
    level = "highly" if severity == "critical" else "moderately"
    message = (
        f"Your program is {level} input-bound: {fraction:.0%} of the step time is spent "
        f"waiting for input. Recommendation: {advice}."
    )
    since = _trailing_since(series, lambda v: input_stall_severity(input_wait(v)) is not None)
    return Alert("input_stall", severity, run.name, message, since)


def loss_nan(run: RunLike) -> Alert | None:
    tag = loss_tag(run.scalars)
    if tag is None:
        return None
    series = run.scalars[tag]
    if math.isfinite(series.last_value):
        return None
    since = _trailing_since(series, lambda v: not math.isfinite(v))
    step = f" at step {series.steps[-1]}" if series.steps else ""
    message = f"{tag} is {series.last_value}{step} — training diverged (lower the learning rate?)"
    return Alert("loss_nan", "critical", run.name, message, since)


EMA_WEIGHT: Final = DEFAULT_WEIGHT


def loss_rising(run: RunLike) -> Alert | None:
    """A smoothed loss that climbs steadily over its last RISING_WINDOW points.

    The EMA starts RISING_WARMUP points before the window: with the default weight 0.6 the
    start's influence is 0.6**40 ≈ 1e-9 by the window, so the tail gives the whole curve's
    smoothed values at a fixed cost."""
    tag = loss_tag(run.scalars)
    if tag is None:
        return None
    series = run.scalars[tag]
    values = tail_floats(series.values, RISING_WINDOW + RISING_WARMUP)
    if len(values) < RISING_WINDOW or not all(map(math.isfinite, values)):
        return None
    window = debiased_ema(values, EMA_WEIGHT)[-RISING_WINDOW:]
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


def loss_spike(run: RunLike) -> Alert | None:
    """The loss's spikes over all its points (alerts.spikes: above 3× its recent median and 10
    robust deviations), each stretch named by its first point. The newest is judged by where
    the loss is now: back within 1.5× or 3 deviations of the median before it is a warning
    that it recovered by itself; still up is critical; a spike that is the newest point alone
    is a warning until the next point says which. The earlier ones the series remembers follow,
    each with whether it came back: one that never did keeps the alert critical."""
    tag = loss_tag(run.scalars)
    if tag is None:
        return None
    series = run.scalars[tag]
    history = series_spikes(series)
    if history is None or not history.spikes:
        return None
    *earlier, newest = history.spikes
    now = series.last_value
    ratio = f"{newest.value / newest.median:.3g}× its" if newest.median > 0 else "far above its"
    what = (f"loss spike: {tag} {newest.value:.4g} at step {newest.step} is {ratio} recent "
            f"median {newest.median:.4g}")
    severity: Severity = "warning"
    if history.last_spiked and newest.step == series.steps[-1]:
        message = f"{what} (if it does not come back, lower the learning rate or clip)"
    elif history.last_spiked or not newest.came_back(now, LOSS_SPIKE_RULE):
        severity = "critical"
        message = (f"{what} and has not come back (now {now:.4g}): the model may have lost its "
                   "training; lower the learning rate, clip, or resume from a checkpoint")
    else:
        message = f"{what}; it recovered by itself (now {now:.4g})"
    if earlier:
        if any(s.back_step is None for s in earlier):
            severity = "critical"
        message += f"; earlier: {spikes_text(earlier, history.count - 1)}"
    return Alert("loss_spike", severity, run.name, message, newest.wall_time)


def series_spikes(series: SeriesLike) -> SpikeHistory | None:
    """A loss series' spike history: the store's, fed every point read; for a series built
    by hand, found over the points it holds."""
    history = getattr(series, "spike_history", None)
    if isinstance(history, SpikeHistory):
        return history
    return spike_history(series.steps, series.wall_times, series.values, LOSS_SPIKE_RULE)


SPIKES_SHOWN: Final = 3  # earlier stretches a message spells out (the rest are counted)


def spike_text(seen: SpikeSeen) -> str:
    """"loss spiked at step 150 (0.52→12.3), recovered at step 153"."""
    back = (f"recovered at step {seen.back_step}" if seen.back_step is not None
            else "has not come back")
    return f"loss spiked at step {seen.step} ({seen.median:.3g}→{seen.value:.3g}), {back}"


def spikes_text(earlier: Sequence[SpikeSeen], count: int) -> str:
    """The newest SPIKES_SHOWN of `earlier`, newest first, and how many more there were."""
    shown = [spike_text(s) for s in reversed(earlier[-SPIKES_SHOWN:])]
    more = count - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def series_alerts(run: RunLike) -> list[Alert]:
    """The rules that depend only on a run's points: computed again only when the run changed."""
    found = [input_stall(run), loss_nan(run), loss_rising(run), gradient_spike(run),
             loss_spike(run)]
    return [a for a in found if a is not None]
