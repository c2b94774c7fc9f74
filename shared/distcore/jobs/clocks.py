"""Other hosts' clocks: a heartbeat or a recorded sample is judged by when distmon saw it change.

A worker's heartbeat times and a `system/` run's sample times are the writing host's wall clock.
Compared with distmon's own, a worker whose clock is 90 s late looked hung while it stepped,
and one far ahead hid a worker that had really stopped. So nothing here compares them: distmon
notes, on its own monotonic clock, when it saw each value change (`Sightings`), and the value's
times are moved onto distmon's clock by that (`rebase_beat`, `rebase_host`): the heartbeat is
as old as distmon's sighting, and the step and hang times the worker wrote beside it move with
it. On the first look (`--once`, or a job distmon starts watching) a value's age comes from
file modification times instead (`first_beat_ages`): its heartbeat file's, else run.json's plus
how far it is behind the job's newest heartbeat (the chief copies them all into run.json at
once). Where a worker's clock and distmon's disagree by more than CLOCK_SKEW_SECONDS, the job
gets an info alert saying so (`clock_note`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Final

from distcore import names
from distcore.alerts import Alert
from distcore.alerts.workers import WorkerBeat
from distcore.jobs.judge import JobFacts
from distcore.jobs.parts import is_system_part
from distcore.jobs.snapshots import Host

MAX_FIRST_AGE: Final = 366 * 86400.0
"""The oldest a first look makes a heartbeat (times in run.json are untrusted: any finite
number, and their differences could overflow)."""
CLOCK_SKEW_SECONDS: Final = 30.0
"""Beyond this, a worker's clock and distmon's are said to disagree (a heartbeat reaches
distmon a beat or two after it is written: that much is no disagreement)."""


class Sightings:
    """When distmon last saw each watched value change, on its own monotonic clock, by job."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._seen: dict[str, dict[Hashable, tuple[object, float]]] = {}

    def age(self, job: str, key: Hashable, value: object, first_age: Callable[[], float]
            ) -> float:
        """Seconds since `value` (of `key` in `job`) was last seen to change; on the first
        look, `first_age()` (what the files say)."""
        now = self._monotonic()
        seen = self._seen.setdefault(job, {})
        entry = seen.get(key)
        if entry is None or entry[0] != value:
            at = now - max(0.0, first_age()) if entry is None else now
            seen[key] = (value, at)
        return now - seen[key][1]

    def keep(self, jobs: set[str]) -> None:
        """Forget the jobs no longer seen (bounded memory)."""
        for job in self._seen.keys() - jobs:
            del self._seen[job]


def first_beat_ages(beats: Sequence[WorkerBeat], file_ages: Mapping[int, float],
                    record_age: float | None) -> dict[int, float]:
    """Each worker's heartbeat age on a first look, by worker: its heartbeat file's age where
    distmon can see the file (`file_ages`: now less its modification time), else run.json's
    age (0 where unknown) plus how far its time is behind the newest heartbeat in run.json."""
    times = [b.time for b in beats if b.time is not None]
    newest = max(times) if times else None
    ages = {}
    for beat in beats:
        if beat.worker in file_ages:
            age = file_ages[beat.worker]
        else:
            behind = newest - beat.time if newest is not None and beat.time is not None else 0.0
            age = max(0.0, record_age or 0.0) + max(0.0, behind)
        ages[beat.worker] = min(max(0.0, age), MAX_FIRST_AGE)  # inf too
    return ages


def rebase_beat(beat: WorkerBeat, age: float, now: float) -> WorkerBeat:
    """The heartbeat with its times on distmon's clock: written `age` seconds before `now`,
    its step's end and its hang's start moved by as much."""
    offset = None if beat.time is None else (now - age) - beat.time
    if offset is None or not math.isfinite(offset):
        return beat

    def moved(value: float | None) -> float | None:
        shifted = None if value is None else value + offset
        return shifted if shifted is not None and math.isfinite(shifted) else None

    return dataclasses.replace(beat, time=now - age, step_time=moved(beat.step_time),
                               hung_since=moved(beat.hung_since))


def rebase_host(host: Host, age: float, now: float) -> Host:
    """A recorded host's sample time on distmon's clock: `age` seconds before `now`."""
    if host.sampled_at is None:
        return host
    return dataclasses.replace(host, sampled_at=now - age)


def _skew_text(worker: str, offset: float) -> str:
    side = "behind" if offset > 0 else "ahead of"
    return f"{worker}'s clock is {abs(offset):.0f} s {side} distmon's"


def clock_note(job: str, written: Sequence[WorkerBeat], rebased: Sequence[WorkerBeat]
               ) -> Alert | None:
    """`clock_skew` (info) where a worker's heartbeat time and when distmon saw it differ by
    more than CLOCK_SKEW_SECONDS: its clock disagrees with distmon's (judged regardless)."""
    parts = []
    for old, new in zip(written, rebased, strict=True):
        if old.time is None or new.time is None:
            continue
        offset = new.time - old.time
        if abs(offset) > CLOCK_SKEW_SECONDS:
            parts.append(_skew_text(old.describe(), offset))
    if not parts:
        return None
    message = ("clocks disagree: " + "; ".join(parts)
               + " (stale and hung are judged by what distmon saw change)")
    return Alert("clock_skew", "info", job, message, None)


def on_our_clock(sightings: Sightings, facts: JobFacts, now: float
                 ) -> tuple[JobFacts, Alert | None]:
    """The job's facts with their heartbeats' and recorded samples' times on distmon's clock
    (by when `sightings` saw them change), and a note where a worker's clock disagrees."""
    agent, note = facts.agent, None
    if agent is not None and agent.workers:
        written = agent.workers
        first = functools.cache(lambda: _first_ages_from_files(facts, written, now))
        beats = tuple(
            rebase_beat(b, sightings.age(facts.name, ("worker", b.worker), b.time,
                                         functools.partial(_first_of, first, b.worker)), now)
            for b in written)  # fmt: skip
        note = clock_note(facts.name, written, beats)
        agent = dataclasses.replace(agent, workers=beats)
    systems = [run for part, run in facts.parts.items() if is_system_part(part)]
    hosts = tuple(
        rebase_host(h, sightings.age(facts.name, ("host", h.key), h.sampled_at,
                                     functools.partial(_file_age, r.last_modified, now)), now)
        for h, r in zip(facts.hosts, systems, strict=True))  # fmt: skip
    return dataclasses.replace(facts, agent=agent, hosts=hosts), note


def _first_of(ages: Callable[[], dict[int, float]], worker: int) -> float:
    return ages().get(worker, 0.0)


def _first_ages_from_files(facts: JobFacts, beats: Sequence[WorkerBeat], now: float
                           ) -> dict[int, float]:
    """Heartbeat ages from the files' modification times, where they are on this machine."""
    local = facts.directory.local if facts.directory is not None else None
    if local is None:
        return first_beat_ages(beats, {}, None)
    files = {b.worker: _mtime(local / names.heartbeat_name(b.worker)) for b in beats}
    ages = {worker: now - t for worker, t in files.items() if t is not None}
    record = _mtime(local / names.RUN_JSON)
    return first_beat_ages(beats, ages, None if record is None else now - record)


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _file_age(modified: float | None, now: float) -> float:
    """A recorded run's age on a first look: since its newest file changed (0 where unknown)."""
    return 0.0 if modified is None else max(0.0, now - modified)
