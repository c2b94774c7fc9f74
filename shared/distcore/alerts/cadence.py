"""How often a run writes, and the rule for a run whose points stopped coming (`run_stalled`).

A run's cadence is read from the tail of its densest series; a writer that logged its whole
history at once, or in bursts, is told apart so that it is never called stalled for its pauses.
"""

from __future__ import annotations

import itertools
import math
import statistics
from typing import Final

from distcore import names
from distcore.alerts import Alert, RunLike, SeriesLike
from distcore.alerts.series import TAIL_POINTS, tail_floats

STALL_FACTOR: Final = 10.0  # a gap this many times the usual interval is a stall
STALL_MIN_SECONDS: Final = 30.0
STALL_HORIZON_SECONDS: Final = 600.0  # beyond this a silent run is just old (idle), not stalled
BURST_GAP_SECONDS: Final = 0.5  # points closer than this were logged in one burst


def usual_interval(run: RunLike) -> float | None:
    """The run's cadence in seconds: how often its densest series gets a point, or None when
    that is not meaningful (fewer than 3 points, or everything written within STALL_MIN_SECONDS:
    a burst writer that logged its whole history at once has no cadence to fall behind).

    It is the median gap between the tail's points; a writer that logs in bursts (many points at
    almost the same time, then a pause) has a median gap near zero, so there the cadence is the
    median of the pauses between bursts."""
    best = densest_series(run)
    return None if best is None else series_cadence(best)


def densest_series(run: RunLike) -> SeriesLike | None:
    """The series usual_interval reads, or None when the run has no cadence to speak of."""
    best = max(run.scalars.values(), key=lambda s: s.count, default=None)
    if best is None or best.count < 3 or len(best.wall_times) < 3:
        return None
    if best.last_wall_time - best.wall_times[0] < STALL_MIN_SECONDS:
        return None
    return best


def series_cadence(best: SeriesLike) -> float | None:
    walls = tail_floats(best.wall_times, TAIL_POINTS)
    gaps = [b - a for a, b in itertools.pairwise(walls) if math.isfinite(b - a) and b >= a]
    if not gaps:
        return None
    typical = statistics.median(gaps)
    if typical >= BURST_GAP_SECONDS:
        return typical
    pauses = [g for g in gaps if g >= BURST_GAP_SECONDS]
    return statistics.median(pauses) if len(pauses) >= 2 else typical or None


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.2g} s"


STALLED: Final = "stalled"
IDLE: Final = "idle"


def silence(agent_status: str | None, files: str, gap: float, limit: float) -> str | None:
    """What a run's silence of `gap` seconds says, past its own `limit` (STALL_FACTOR times its
    cadence): STALLED where run.json says the job is running (it should be writing); for a run
    no run.json speaks for (a script of the user's own, which may simply have ended), STALLED
    while its files are live, IDLE once they went idle (the store's live threshold), nothing
    once it is old (STALL_HORIZON_SECONDS). Nothing for an ended job or a gone run."""
    if files == "gone" or (agent_status is not None and agent_status != names.STATUS_RUNNING):
        return None  # ended jobs never stall
    if gap <= limit:
        return None
    if agent_status is not None:
        return STALLED
    if gap > STALL_HORIZON_SECONDS:
        return None
    return IDLE if files == "idle" else STALLED


def run_stalled(
    run: RunLike, now: float, agent_status: str | None = None, interval: float | None = None
) -> Alert | None:
    """Points stopped arriving: a gap far longer than usual, on a run that should be writing
    (a warning), or on a run without run.json whose files went idle (information: it may have
    ended, which nothing records). `interval`: the run's cadence when the caller cached it
    (usual_interval otherwise)."""
    if run.status == "gone" or run.last_update is None:
        return None
    if agent_status is not None and agent_status != names.STATUS_RUNNING:
        return None  # ended jobs never stall
    interval = usual_interval(run) if interval is None else interval
    if interval is None:
        return None
    gap = now - run.last_update
    found = silence(agent_status, run.status, gap, max(STALL_FACTOR * interval, STALL_MIN_SECONDS))
    usual = f"usually every {_seconds(interval)}"
    if found == IDLE:
        message = f"idle: no new data for {gap:.0f} s ({usual})"
        return Alert("run_idle", "info", run.name, message, run.last_update)
    if found == STALLED:
        message = f"no new points for {gap:.0f} s ({usual}) — stalled?"
        return Alert("run_stalled", "warning", run.name, message, run.last_update)
    return None


def is_advancing(run: RunLike, now: float, interval: float | None) -> bool:
    """Points still arriving at about the usual pace."""
    if interval is None or run.last_update is None or run.status == "gone":
        return False
    return now - run.last_update <= max(STALL_FACTOR * interval, STALL_MIN_SECONDS)
