"""The point rules' tail arithmetic over a series' numpy columns, with the rules' own results.

distcore.alerts looks at the newest points of every run of a sweep (10,000 small runs): done
item by item over the store's Columns, the cadence and the rising-loss rule were most of the job
index's cost. Here the same arithmetic runs on the float64 arrays the Columns share:

- `quiet_rises` runs loss_rising's EMA and decision over many runs' tails at once, exactly (the
  same IEEE operations in the same order), so the rule's own Python loop runs only for the few
  tails that rise (for its message) or overflow.
- `spike_candidates` bounds the spike rule's windows over a loss's new points at once, by the
  rule's own bounds (alerts.spikes), so the store's tracker looks only at the points that may
  spike.
- `steady_cadences` is usual_interval's gap median over many runs' tails at once, float for
  float the same (the same IEEE subtractions, statistics.median's formula), where it is plain.

One run's numpy calls cost about what its Python loop does (60 points); many runs' tails in one
array are where numpy pays, so the job index asks for the facts of all changed jobs together.

`series_alerts_many` and `usual_intervals` are the batch forms of the rules the job index
calls (distcore.jobs.judge.job_facts_many); distcore.alerts itself stays free of numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from distcore.alerts import Alert, RunLike, cadence, series
from distcore.smoothing import debiased_ema_rows

F64 = npt.NDArray[np.float64]

def float_tail(values: Sequence[Any], n: int) -> F64 | None:
    """The newest n items as a float64 array (a store's Column: a view, no copy), or None when
    they are not float64 (a hand-built series of ints takes the rules' Python path)."""
    if hasattr(values, "__array__"):  # a Column: its array, sliced without a Column made
        array = np.asarray(values)[-n:]
    else:
        array = np.asarray(values[-n:] if len(values) > n else values)
    return array if array.dtype == np.float64 and array.ndim == 1 else None


def quiet_rises(tails: F64, weight: float, window: int, fraction: float,
                steady: float) -> npt.NDArray[np.bool_]:
    """For each row of `tails` (the newest values of a loss each, all rows of one length):
    True where loss_rising's rule surely says nothing (a NaN or an infinity, a constant tail,
    or its smoothed window does not rise enough, or steadily enough), False where the rule
    itself must run (it fires, or the EMA overflowed and takes smoothing's bounded path).

    Exact, not an estimate: the EMA is smoothing's own (`debiased_ema_rows`, the rule's
    operations over every row at once). The decision then uses the rule's own comparisons.
    (Its minimum may be -0.0 where the rule's is 0.0: a rise of zero either way, which never
    fires.)"""
    points = tails.shape[1]
    with np.errstate(all="ignore"):
        finite = np.isfinite(tails).all(axis=1)
        constant = (tails == tails[:, :1]).all(axis=1)
        every = debiased_ema_rows(tails, weight)
        # An infinity anywhere (a division can overflow where the sum did not), as the rule
        # looks for it: there smoothing takes its bounded path, and the rule decides.
        overflow = ~np.isfinite(every).all(axis=1)
        smoothed = every[:, points - window:]
        low = smoothed.min(axis=1)
        rise = smoothed[:, -1] - low
        ups = np.count_nonzero(smoothed[:, 1:] > smoothed[:, :-1], axis=1)
        silent = (rise <= fraction * np.maximum(np.abs(low), 1e-12)) | (ups < steady * (window - 1))
    quiet: npt.NDArray[np.bool_] = ~finite | constant | (~overflow & silent)
    return quiet


def steady_cadences(walls: F64, burst_gap: float) -> list[float | None]:
    """For each row of `walls` (a tail of wall times each): its median gap, as usual_interval
    computes it, when every gap is valid (finite, not going back) and the median is at least
    `burst_gap`, the case of nearly every writer; None where usual_interval must decide (a
    burst writer, a clock that went back). Equal gaps are equal floats (gaps are >= 0, and a
    zero median is never returned), so the order sorting leaves them in cannot matter."""
    later, earlier = walls[:, 1:], walls[:, :-1]
    with np.errstate(all="ignore"):
        steps = later - earlier
        valid = np.asarray((np.isfinite(steps) & (later >= earlier)).all(axis=1))
    ordered = np.sort(steps, axis=1)
    half = ordered.shape[1] // 2
    if ordered.shape[1] % 2:  # statistics.median's formula: the middle, or the two's mean
        middle = ordered[:, half].tolist()
    else:
        middle = [(a + b) / 2 for a, b in zip(ordered[:, half - 1].tolist(),
                                              ordered[:, half].tolist(), strict=True)]
    return [m if ok and m >= burst_gap else None
            for m, ok in zip(middle, valid.tolist(), strict=True)]


def spike_candidates(recent: Sequence[float], values: F64, window: int, min_points: int,
                     block: int, factor: float) -> list[int] | None:
    """The indices of `values` (a series' new points, `recent` the points before them, at most
    `window`) that may spike under alerts.spikes' rule; None where a NaN or an infinity leaves
    no bound (every point is looked at). By the rule's own bound, over every block at once:
    each block's k-th smallest of its windows together (k: half the smallest window), times
    `factor` (a hair below), bounds all its windows' medians from below."""
    full = np.concatenate([np.asarray(recent, dtype=np.float64), values])
    if not np.isfinite(full).all():
        return None
    held, total = len(recent), len(full)
    first = held + max(0, min_points - held)  # fewer points before: no median, no spike
    if first >= total:
        return []
    los = np.arange(first, total, block)
    his = np.minimum(los + block, total)
    at = (los - window)[:, None] + np.arange(window + block - 1)[None, :]
    inside = (at >= 0) & (at < (his - 1)[:, None])
    unions = np.where(inside, full[np.clip(at, 0, total - 1)], np.inf)
    k = (np.minimum(los, window) + 1) // 2
    bound = np.sort(unions, axis=1)[np.arange(len(los)), k - 1]
    floor = np.where(bound >= 0, factor * bound * (1.0 - 1e-9), bound)
    above = full[first:] > np.repeat(floor, his - los)
    found: list[int] = (np.flatnonzero(above) + (first - held)).tolist()
    return found


def stack(rows: Sequence[F64]) -> F64:
    stacked: F64 = np.stack(rows)
    return stacked


BATCH_MIN: Final = 16  # fewer runs than this: one by one (an array's fixed costs dominate)


def series_alerts_many(runs: Sequence[RunLike]) -> list[list[Alert]]:
    """`series.series_alerts` of each run, the same alerts, for many runs at once: loss_rising's
    EMA runs over all their loss tails in one array (quiet_rises, the same floats), so its
    Python loop (~60 points a run) runs only for the tails that rise."""
    quiet = quiet_losses(runs) if len(runs) >= BATCH_MIN else set()
    out = []
    for i, run in enumerate(runs):
        found = [series.input_stall(run), series.loss_nan(run),
                 None if i in quiet else series.loss_rising(run), series.gradient_spike(run),
                 series.loss_spike(run)]
        out.append([a for a in found if a is not None])
    return out


def quiet_losses(runs: Sequence[RunLike]) -> set[int]:
    """The runs (by index) whose loss_rising is None, decided over all their tails at once
    (quiet_rises); the others' rule runs one by one."""
    points = series.RISING_WINDOW + series.RISING_WARMUP
    rows, at = [], []
    for i, run in enumerate(runs):
        tag = series.loss_tag(run.scalars)
        values = run.scalars[tag].values if tag is not None else ()
        if len(values) >= points and (row := float_tail(values, points)) is not None:
            rows.append(row)
            at.append(i)
    if len(rows) < BATCH_MIN:
        return set()
    quiet = quiet_rises(stack(rows), series.EMA_WEIGHT,
                        series.RISING_WINDOW, series.RISING_FRACTION,
                        series.RISING_STEADY).tolist()
    return {i for i, q in zip(at, quiet, strict=True) if q}


def usual_intervals(runs: Sequence[RunLike]) -> list[float | None]:
    """`cadence.usual_interval` of each run, the same floats, for many runs at once: the tails
    of their densest series in one array (steady_cadences); the rare run it leaves undecided
    (a burst writer, a clock that went back) one by one."""
    out: list[float | None] = [None] * len(runs)
    rows, at = [], []
    for i, run in enumerate(runs):
        best = cadence.densest_series(run)
        if best is None:
            continue
        walls, points = best.wall_times, series.TAIL_POINTS
        if len(walls) >= points and (row := float_tail(walls, points)) is not None:
            rows.append(row)
            at.append(i)
        else:
            out[i] = cadence.series_cadence(best)
    if len(rows) < BATCH_MIN:
        for i in at:
            out[i] = cadence.usual_interval(runs[i])
        return out
    for i, found in zip(at, steady_cadences(stack(rows), cadence.BURST_GAP_SECONDS),
                        strict=True):
        out[i] = found if found is not None else cadence.usual_interval(runs[i])
    return out
