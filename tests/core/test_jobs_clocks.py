"""Other hosts' clocks: heartbeats judged by when distmon saw them change (jobs/clocks.py), never
by comparing a worker's wall clock with distmon's; pure tables, then through the real index and
`--once` over run directories whose heartbeats carry skewed times, as distagent writes them."""

from __future__ import annotations

import io
import json
import math
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distcore import names
from distcore.alerts import Alert
from distcore.alerts.workers import WorkerBeat, hung_alert
from distcore.jobs.clocks import Sightings, clock_note, first_beat_ages, rebase_beat
from distmon.once import run_once
from distmon.options import Options
from tests.core.test_jobs_incremental import Clock
from tests.core.test_jobs_index import index_over, snapshot
from tests.kit.writers import write_scalars

WALL = 1_800_000_000.0
HANG = 60.0


def _first_hung(skew: float, stops_at: float | None, until: float = 200.0) -> float | None:
    """When (seconds on distmon's clock) a one-worker job first reads hung: its heartbeat,
    written every 2 s on a clock `skew` seconds off distmon's, stops changing at `stops_at`."""
    ticks = Clock(0.0)
    sightings = Sightings(ticks)
    t = 0.0
    while t <= until:
        ticks.now = t
        written = t if stops_at is None else min(t, stops_at)
        beat = WorkerBeat(worker=0, host="n0", time=WALL + written + skew, beat_seconds=2.0,
                          step=int(written), step_time=WALL + written + skew - 1.0,
                          hang_seconds=HANG, phase="computing")
        age = sightings.age("j", ("worker", 0), beat.time, lambda: 0.0)
        if hung_alert("j", [rebase_beat(beat, age, WALL + t)], WALL + t) is not None:
            return t
        t += 2.0
    return None


@pytest.mark.parametrize(("skew", "stops_at", "hung_at"), [
    (0.0, None, None),  # stepping, clocks agree
    (-90.0, None, None),  # a worker 90 s late while it steps: never hung
    (3600.0, None, None),  # an hour ahead while it steps
    (0.0, 20.0, 82.0),  # stopped at 20 s: hung once distmon saw no change for over 60 s
    (3600.0, 20.0, 82.0),  # an hour ahead and really stopped: the same
    (-90.0, 20.0, 82.0),  # 90 s late and really stopped: the same, not at once
])
def test_hung_by_what_distmon_saw_change(skew: float, stops_at: float | None,
                                         hung_at: float | None) -> None:
    assert _first_hung(skew, stops_at) == hung_at


def beat(worker: int, at: float | None, step: int = 40) -> WorkerBeat:
    return WorkerBeat(worker=worker, host=f"n{worker}", time=at, beat_seconds=2.0, step=step)


@pytest.mark.parametrize(("beats", "files", "record", "ages"), [
    # Heartbeat files distmon can see: their ages, whatever the times inside say.
    ([beat(0, WALL), beat(1, WALL - 500)], {0: 1.0, 1: 3.0}, 2.0, {0: 1.0, 1: 3.0}),
    # Only run.json: its age, plus how far a worker is behind the newest heartbeat.
    ([beat(0, WALL), beat(1, WALL - 30)], {}, 5.0, {0: 5.0, 1: 35.0}),
    ([beat(0, WALL), beat(1, WALL + 3600)], {}, None, {0: 3600.0, 1: 0.0}),
    ([beat(0, None), beat(1, WALL)], {1: 2.0}, 7.0, {0: 7.0, 1: 2.0}),
    ([beat(0, WALL)], {0: -4.0}, None, {0: 0.0}),  # a file "from the future": now
    # Untrusted times far apart: an age is at most a year, never inf.
    ([beat(0, 1e308), beat(1, -1e308)], {}, None, {0: 0.0, 1: 366 * 86400.0}),
])
def test_first_beat_ages(beats: list[WorkerBeat], files: dict[int, float],
                         record: float | None, ages: dict[int, float]) -> None:
    assert first_beat_ages(beats, files, record) == ages


@pytest.mark.parametrize(("written", "seen", "message"), [
    ([beat(0, WALL - 90)], [beat(0, WALL)],
     "clocks disagree: worker 0 (n0)'s clock is 90 s behind distmon's"),
    ([beat(0, WALL), beat(1, WALL + 3600)], [beat(0, WALL - 1), beat(1, WALL - 2)],
     "clocks disagree: worker 1 (n1)'s clock is 3602 s ahead of distmon's"),
    ([beat(0, WALL - 10)], [beat(0, WALL)], None),  # a beat or two of lag: no disagreement
    ([beat(0, None)], [beat(0, None)], None),
])
def test_clock_note(written: list[WorkerBeat], seen: list[WorkerBeat], message: str | None
                    ) -> None:
    note = clock_note("j", written, seen)
    if message is None:
        assert note is None
    else:
        assert note is not None and (note.kind, note.severity) == ("clock_skew", "info")
        assert note.message.startswith(message)


# --- through the real index and --once ------------------------------------------------------

def write_job(root: Path, skew: float, *, age: float = 0.0, step: int = 40) -> Path:
    """A two-worker job as distagent leaves it: a training run, each worker's heartbeat file
    and run.json's copy of them, the heartbeats' times on a clock `skew` s off this one's, the
    files last written `age` s ago."""
    job = root / "job"
    if not (job / "train").exists():
        write_scalars(job / "train", [1.0, 0.9, 0.8], start=time.time() - 10)
    now = time.time() - age
    workers = {}
    for i in (0, 1):
        workers[str(i)] = {
            "worker": i, "host": f"node{i}", "time": now + skew, "beat_seconds": 2.0,
            "step": step, "step_time": now + skew - 1.0, "hang_seconds": HANG,
            "phase": "computing"}  # fmt: skip
        (job / names.heartbeat_name(i)).write_text(json.dumps(workers[str(i)]))
    tmp = job / "run.json.tmp"
    tmp.write_text(json.dumps({"status": "running", "last_step": step, "workers": workers}))
    tmp.replace(job / names.RUN_JSON)
    for path in job.glob("*.json"):
        os.utime(path, (now, now))
    return job


def alerts_of(kind: str, alerts: Any) -> list[Any]:
    return [a for a in alerts if (a.kind if isinstance(a, Alert) else a["kind"]) == kind]


def once(root: Path) -> dict[str, Any]:
    out = io.StringIO()
    run_once(Options(logdirs=(root,), once=True, json=True, no_gpu=True), out)
    doc: dict[str, Any] = json.loads(out.getvalue())
    return doc


def test_once_a_late_clock_while_stepping_is_not_hung(tmp_path: Path) -> None:
    write_job(tmp_path, skew=-90.0)
    doc = once(tmp_path)
    assert alerts_of("hung", doc["alerts"]) == []
    (note,) = alerts_of("clock_skew", doc["alerts"])
    assert "worker 0 (node0)'s clock is 90 s behind distmon's" in note["message"]


def test_once_a_clock_ahead_does_not_hide_a_stopped_job(tmp_path: Path) -> None:
    write_job(tmp_path, skew=10800.0, age=7200.0)  # last written 2 h ago, 3 h ahead
    (hung,) = alerts_of("hung", once(tmp_path)["alerts"])
    assert re.search(r"heartbeats of workers 0 and 1 stopped 720\d s ago", hung["message"])


@pytest.mark.parametrize("skew", [-90.0, 3600.0])
def test_the_index_judges_by_what_it_saw_change(tmp_path: Path, skew: float) -> None:
    ticks = Clock(0.0)
    index, watcher = index_over(tmp_path, monotonic=ticks)
    step = 40
    for _ in range(6):  # stepping for 150 s of distmon's clock: never hung
        write_job(tmp_path, skew, step=step)
        watcher.scan_once()
        assert alerts_of("hung", snapshot(index).alerts) == []
        ticks.now += 30.0
        step += 10
    # Then it stops: hung once distmon has seen no change for the hang limit.

    def stopped() -> list[Any]:
        return alerts_of("hung", snapshot(index).alerts)

    ticks.now += HANG - 30.0 - 1.0
    assert stopped() == []
    ticks.now += 2.0
    (hung,) = stopped()
    assert "heartbeats of workers 0 and 1 stopped 61 s ago" in hung.message


TIMES = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False))


@given(st.lists(st.tuples(TIMES, TIMES, TIMES), max_size=4),
       st.dictionaries(st.integers(0, 3), st.floats(allow_nan=False, allow_infinity=False)),
       st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)))
def test_untrusted_heartbeat_times_stay_finite(
    times: list[tuple[float | None, float | None, float | None]],
    files: dict[int, float], record: float | None,
) -> None:
    """run.json's times are any finite numbers: moved onto distmon's clock, every one stays
    finite (the JSON stays valid), and the rules judge them without an exception."""
    beats = [WorkerBeat(worker=i, time=t, step_time=s, hung_since=h, hang_seconds=60.0)
             for i, (t, s, h) in enumerate(times)]  # fmt: skip
    ages = first_beat_ages(beats, files, record)
    moved = [rebase_beat(b, ages[b.worker], WALL) for b in beats]
    for beat_ in moved:
        for value in (beat_.time, beat_.step_time, beat_.hung_since):
            assert value is None or math.isfinite(value)
    hung_alert("j", moved, WALL)
    clock_note("j", beats, moved)
