"""The job index's fast point rules against the rules as they were (tests/core/oracle_rules.py):
the same alerts, messages and cadences, float for float, on generated series (NaN, infinities,
the largest floats, tiny ones, empty and short series, constant tails, bursts, clocks that go
back, losses that rise right at the rule's thresholds), many runs at once as a sweep's refresh
computes them and one by one."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from distcore import names, tails
from distcore.alerts.cadence import usual_interval
from distcore.alerts.series import RISING_WARMUP, RISING_WINDOW, series_alerts
from distcore.events.snapshots import Column, RunSnapshot, Series
from distcore.jobs.judge import job_facts_many
from distcore.location import RunLocation
from tests.core import oracle_rules as oracle

POINTS = RISING_WINDOW + RISING_WARMUP

_odd = st.sampled_from([math.nan, math.inf, -math.inf, 1.7e308, -1.7e308, 5e-324, 1e-310, 0.0,
                        -0.0, 1e200, 1e-200])
_plain = st.floats(-1e6, 1e6, allow_nan=False)
_value = st.one_of(_plain, _plain, _plain, _odd, st.floats(width=32))


@st.composite
def _curve(draw: st.DrawFn) -> list[float]:
    """A loss: random points, or a trend (falling, flat, rising by about the rule's 10%) with
    noise, so that many tails sit at the thresholds the proof must not cross."""
    n = draw(st.sampled_from([0, 1, 19, 20, 21, 59, 60, 61, 64, 65]) | st.integers(60, 130))
    kind = draw(st.sampled_from(["random", "trend", "trend", "trend", "constant", "steps"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "random":
        values = (rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n)).tolist()
        for at in draw(st.lists(st.integers(0, max(0, n - 1)), max_size=3)) if n else ():
            values[at] = draw(_value)
        return values
    if kind == "constant":
        return [draw(_value)] * n
    scale = draw(st.sampled_from([1.0, 1e-3, 1e6, 1e-250, 1e250, 1e300]))
    start = draw(st.floats(0.1, 3.0)) * scale * draw(st.sampled_from([1, -1]))
    slope = draw(st.floats(-0.01, 0.01)) * scale
    noise = draw(st.sampled_from([0.0, 1e-15, 1e-9, 1e-3, 0.01, 0.02])) * scale
    jitter = rng.standard_normal(n) * noise
    values = [start + slope * i + float(j) for i, j in enumerate(jitter)]
    if kind == "steps":  # a staircase: flat stretches make the EMA's steps tiny
        values = [v - (v % (scale * 0.01)) if math.isfinite(v) else v for v in values]
    odd_at: int = draw(st.integers(-n, n - 1)) if n else -1  # half the time, one odd value
    if odd_at >= 0:
        values[odd_at] = draw(_odd)
    return values


@st.composite
def _walls(draw: st.DrawFn, n: int) -> list[float]:
    kind = draw(st.sampled_from(["steady", "steady", "bursts", "random", "back"]))
    if kind == "random":
        return (np.random.default_rng(draw(st.integers(0, 2**32 - 1))).random(n) * 1e9).tolist()
    every = draw(st.sampled_from([0.0, 0.01, 0.5, 1.0, 2.5, 60.0]))
    start = draw(st.floats(0, 2e9))
    walls = [start + every * i for i in range(n)]
    if kind == "bursts":  # runs of equal times, then a pause
        size = draw(st.integers(2, 12))
        walls = [start + draw(st.sampled_from([5.0, 40.0])) * (i // size) for i in range(n)]
    if kind == "back" and n > 2:
        walls[draw(st.integers(1, n - 1))] -= draw(st.floats(0.1, 1e4))
    return walls


def _series(tag: str, values: list[float], walls: list[float]) -> Series:
    """As the store makes it: float64 Columns (int64 steps)."""
    finite = [v for v in values if math.isfinite(v)] or [math.nan]
    return Series(tag=tag, steps=Column(np.arange(len(values), dtype=np.int64)),
                  values=Column(np.array(values, dtype=np.float64)),
                  wall_times=Column(np.array(walls, dtype=np.float64)),
                  last_step=len(values) - 1, last_value=values[-1], last_wall_time=walls[-1],
                  count=len(values), min=min(finite), max=max(finite))


@st.composite
def _run(draw: st.DrawFn, i: int) -> RunSnapshot:
    scalars = {}
    for tag in draw(st.lists(st.sampled_from(["loss", "epoch_loss", "accuracy",
                                              names.INPUT_WAIT_FRACTION, names.GRAD_NORM]),
                             unique=True, max_size=3)):
        values = draw(_curve())
        if values:
            scalars[tag] = _series(tag, values, draw(_walls(len(values))))
    return RunSnapshot(name=f"run-{i}", path=RunLocation.on_this_machine(f"/logs/run-{i}"),
                       status="live", files=1, problems=(), hparams={}, scalars=scalars,
                       last_update=None)


@st.composite
def _runs(draw: st.DrawFn) -> list[RunSnapshot]:
    count = draw(st.sampled_from([1, 3, 2 * tails.BATCH_MIN, 3 * tails.BATCH_MIN]))
    return [draw(_run(i)) for i in range(count)]


def _same(ours: Sequence[object], theirs: Sequence[object]) -> None:
    """Equal, and float for float (repr tells -0.0 from 0.0 and shows every digit)."""
    assert ours == theirs or repr(ours) == repr(theirs)
    assert repr(ours) == repr(theirs)


@settings(max_examples=40, deadline=None)
@given(_runs())
def test_point_rules_match_the_rules_as_they_were(runs: list[RunSnapshot]) -> None:
    expected = [oracle.series_alerts(r) for r in runs]
    _same(tails.series_alerts_many(runs), expected)
    _same([series_alerts(r) for r in runs], expected)
    cadences = [oracle.usual_interval(r) for r in runs]
    _same(tails.usual_intervals(runs), cadences)
    _same([usual_interval(r) for r in runs], cadences)


@settings(max_examples=10, deadline=None)
@given(_runs())
def test_job_facts_match_the_facts_as_they_were(runs: list[RunSnapshot]) -> None:
    jobs = [(r.name, {"": r}, None, i) for i, r in enumerate(runs)]
    for facts, run in zip(job_facts_many(jobs), runs, strict=True):
        _same(facts.point_alerts, tuple(oracle.series_alerts(run)))
        _same(list(facts.intervals.items()), [(run.name, oracle.usual_interval(run))])


def test_rising_losses_many_at_once_alert_as_one_by_one() -> None:
    """A sweep where some losses rise: the batch leaves them to the rule, which names them."""
    walls = [1000.0 + i for i in range(POINTS)]
    runs = []
    for i in range(2 * tails.BATCH_MIN):
        rising = i % 3 == 0
        values = [1.0 + (0.01 if rising else -0.01) * k + 0.001 * math.sin(k * i)
                  for k in range(POINTS)]
        runs.append(RunSnapshot(name=f"r{i}", path=RunLocation.on_this_machine(f"/l/r{i}"),
                                status="live", files=1, problems=(), hparams={},
                                scalars={"loss": _series("loss", values, walls)},
                                last_update=walls[-1]))
    found = tails.series_alerts_many(runs)
    assert [bool(f) for f in found] == [i % 3 == 0 for i in range(len(runs))]
    _same(found, [oracle.series_alerts(r) for r in runs])


def _near_threshold(rng: np.random.Generator, scale: float) -> list[float]:
    """A loss that is flat, then drifts up by about the rule's 10% over the window, noisy
    enough that about as many steps rise as the rule asks for."""
    drift = rng.uniform(0.0, 0.012)
    noise = rng.choice([0.0, 1e-12, 1e-6, rng.uniform(0.0, 0.012)])
    steps = drift + noise * rng.standard_normal(POINTS)
    steps[: RISING_WARMUP] *= rng.uniform(0.0, 0.3)
    return ((1.0 + np.cumsum(steps)) * scale).tolist()


def test_losses_at_the_thresholds_alert_as_one_by_one() -> None:
    """Thousands of tails near both thresholds (rise ~10%, ~70% of steps up), at several
    scales: the batch decides every one as the rule does."""
    rng = np.random.default_rng(20)
    walls = [1000.0 + i for i in range(POINTS)]
    runs = []
    for i in range(3000):
        values = _near_threshold(rng, float(rng.choice([1.0, -1.0, 1e-190, 1e190, 3e-7])))
        runs.append(RunSnapshot(name=f"r{i}", path=RunLocation.on_this_machine(f"/l/r{i}"),
                                status="live", files=1, problems=(), hparams={},
                                scalars={"loss": _series("loss", values, walls)},
                                last_update=walls[-1]))
    expected = [oracle.series_alerts(r) for r in runs]
    fired = sum(1 for e in expected if e)
    assert 300 < fired < 2700  # both sides of the thresholds are well represented
    # Exact: every tail that does not fire was decided in the batch (none overflows here).
    assert len(tails.quiet_losses(runs)) == len(runs) - fired
    _same(tails.series_alerts_many(runs), expected)


_LARGEST = 1.7976931348623157e308


def test_losses_near_the_largest_floats_alert_as_one_by_one() -> None:
    """Tails whose EMA overflows in its first steps (a division by 0.4 of 0.4 x) or late,
    among many that do not: smoothing's bounded path decides for them, as one by one."""
    rng = np.random.default_rng(7)
    walls = [1000.0 + i for i in range(POINTS)]
    runs = []
    for i in range(4 * tails.BATCH_MIN):
        values = _near_threshold(rng, 1.0)
        if i % 2:  # the largest float, then a little less somewhere: the EMA overflows
            values = [_LARGEST] * POINTS
            values[int(rng.integers(1, POINTS))] = _LARGEST * float(rng.uniform(0.5, 0.999))
        runs.append(RunSnapshot(name=f"r{i}", path=RunLocation.on_this_machine(f"/l/r{i}"),
                                status="live", files=1, problems=(), hparams={},
                                scalars={"loss": _series("loss", values, walls)},
                                last_update=walls[-1]))
    overflowing = [any(map(math.isinf, oracle._ema(list(r.scalars["loss"].values), 0.6)))
                   for r in runs]
    assert sum(overflowing) > tails.BATCH_MIN  # the bounded path is taken, and often
    assert not tails.quiet_losses(runs) & {i for i, o in enumerate(overflowing) if o}
    _same(tails.series_alerts_many(runs), [oracle.series_alerts(r) for r in runs])
