"""The attempt clock on an injected clock: every second in one bucket, carried across attempts,
work past a checkpoint lost on resume and discarded on rollback; Slurm's pending time parsed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distagent.train.ledger import (
    STEPS,
    AttemptClock,
    previous_attempts,
    slurm_pending,
    worker_ledger_path,
)
from distcore.jobs.ledger import BUCKETS, ledger_from_record


class Ticks:
    """A clock the test moves by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def add(self, seconds: float) -> None:
        self.t += seconds


def clock_at(ticks: Ticks, previous: dict[str, Any] | None = None, *, started: float = 990.0,
             pending: float | None = None) -> AttemptClock:
    return AttemptClock(previous, process_start=started, pending_seconds=pending, wall=ticks,
                        clock=ticks)


def run_steps(clock: AttemptClock, ticks: Ticks, seconds: float, wait: float) -> None:
    clock.switch(STEPS)
    ticks.add(seconds)
    clock.steps_logged(wait)


def test_every_second_lands_in_one_bucket() -> None:
    ticks = Ticks()
    clock = clock_at(ticks)  # 10 s since the process started
    ticks.add(2.0)  # the rest of start-up: the first call
    run_steps(clock, ticks, 6.0, wait=1.5)
    clock.switch(None)
    ticks.add(0.5)  # a log point's writes
    with clock.spent("checkpoint"):
        ticks.add(1.0)
    with clock.spent("evaluation"):
        ticks.add(3.0)
    ledger = clock.ledger()
    assert ledger["startup"] == pytest.approx(12.0)
    assert (ledger["compute"], ledger["input_wait"]) == pytest.approx((4.5, 1.5))
    assert (ledger["checkpoint"], ledger["evaluation"]) == pytest.approx((1.0, 3.0))
    assert ledger["unknown"] == pytest.approx(0.5)
    fields = clock.record_fields()
    assert fields["ledger_wall"] == pytest.approx(22.5)
    assert fields["goodput"] == pytest.approx(4.5 / 22.5)


class Moving(Ticks):
    """A clock that moves on at every reading (a loaded machine between two reads)."""

    def __call__(self) -> float:
        self.t += 0.012
        return self.t


def test_a_records_buckets_sum_to_the_wall_it_states() -> None:
    ticks = Moving()
    clock = clock_at(ticks)
    run_steps(clock, ticks, 6.0, wait=1.5)
    with clock.spent("checkpoint"):
        ticks.add(1.0)
    fields = clock.record_fields()
    assert sum(fields["ledger"].values()) == pytest.approx(fields["ledger_wall"], abs=1e-5)
    assert fields["ledger_time"] == pytest.approx(fields["ledger_start"] + fields["ledger_wall"])


@pytest.mark.parametrize(("mark_step", "resumed_step", "lost", "unknown"), [
    (20, 20, 4.25, 0.0),  # the work after the checkpoint it resumes from (and its log
    # point's writes): lost
    (10, 20, 0.0, 0.25),  # the record's mark is older than the checkpoint: nothing proven
])
def test_a_resume_loses_the_work_since_its_checkpoint(
        mark_step: int, resumed_step: int, lost: float, unknown: float) -> None:
    ticks = Ticks()
    first = clock_at(ticks)
    run_steps(first, ticks, 5.0, wait=1.0)
    first.checkpointed(mark_step)
    run_steps(first, ticks, 4.0, wait=1.0)
    first.switch(None)
    ticks.add(0.25)  # the log point's writes; killed after this
    killed = first.save()
    ticks.add(30.0)  # down, then the new process starts
    second = clock_at(ticks, json.loads(json.dumps(killed)), started=ticks.t - 7.0)
    second.resumed(resumed_step)
    ledger = second.ledger()
    assert ledger["lost"] == pytest.approx(lost)
    assert ledger["unknown"] == pytest.approx(unknown)
    assert ledger["compute"] + ledger["input_wait"] == pytest.approx(5.0 if lost else 9.0)
    assert ledger["scheduler"] == pytest.approx(23.0)  # the gap, less the new process's age
    assert ledger["startup"] == pytest.approx(10.0 + 7.0)
    assert sum(ledger.values()) == pytest.approx(ticks.t - 990.0)


def test_a_rollback_discards_the_work_since_the_restored_checkpoint() -> None:
    ticks = Ticks()
    clock = clock_at(ticks, started=1000.0)
    run_steps(clock, ticks, 4.0, wait=0.0)
    clock.checkpointed(4)
    run_steps(clock, ticks, 3.0, wait=1.0)  # logged, then diverged
    clock.switch(None)
    ticks.add(0.25)  # that log point's writes
    clock.switch(STEPS)
    ticks.add(1.0)  # not yet logged
    with clock.spent("recovery"):
        ticks.add(0.5)  # the restore
    clock.rolled_back(4)
    ledger = clock.ledger()
    assert ledger["recovery"] == pytest.approx(3.0 + 0.25 + 1.0 + 0.5)
    assert ledger["unknown"] == pytest.approx(0.0)
    assert (ledger["compute"], ledger["input_wait"]) == pytest.approx((4.0, 0.0))


def test_slurm_pending_time_starts_the_job_earlier() -> None:
    ticks = Ticks()
    clock = clock_at(ticks, pending=120.0)
    assert clock.ledger()["scheduler"] == 120.0
    assert clock.record_fields()["ledger_wall"] == pytest.approx(130.0)


@pytest.mark.parametrize(("text", "seconds"), [
    ("JobId=7 SubmitTime=2026-01-02T03:04:05 EligibleTime=x StartTime=2026-01-02T03:06:05", 120.0),
    ("JobId=7 SubmitTime=2026-01-02T03:04:05 StartTime=Unknown", None),
    ("JobId=7 StartTime=2026-01-02T03:06:05", None),
    ("JobId=7 SubmitTime=2026-01-02T03:06:05 StartTime=2026-01-02T03:04:05", None),
])
def test_slurm_pending_from_scontrol(text: str, seconds: float | None) -> None:
    assert slurm_pending(text) == seconds


def test_the_worker_file_wins_over_run_json(tmp_path: Path) -> None:
    """A worker's own file, even older: run.json is the chief's, and may be newer because
    this worker was killed before the chief ended."""
    (tmp_path / "run.json").write_text(json.dumps({"name": "x", "ledger_time": 5.0,
                                                   "ledger": {"compute": 1.0}}))
    from_run_json = previous_attempts(tmp_path, 1)
    assert from_run_json is not None and from_run_json["ledger"] == {"compute": 1.0}
    path = worker_ledger_path(tmp_path, 1)
    path.parent.mkdir()
    path.write_text(json.dumps({"ledger_time": 4.0, "ledger": {"compute": 2.0}}) + " " * 50)
    assert previous_attempts(tmp_path, 1) == {"name": "x", "ledger_time": 4.0,
                                              "ledger": {"compute": 2.0}}
    path.write_text("[not an object")
    from_run_json = previous_attempts(tmp_path, 1)
    assert from_run_json is not None and from_run_json["ledger_time"] == 5.0


def test_the_file_rewritten_in_place_stays_one_document(tmp_path: Path) -> None:
    ticks = Ticks()
    clock = AttemptClock(None, process_start=990.0, wall=ticks, clock=ticks,
                         path=worker_ledger_path(tmp_path, 0))
    clock.mark = {"step": 1, "time": 1.0, "buckets": {"compute": 1.0} | {str(i): 0.0 for i in
                                                                        range(40)}}
    clock.save(1)
    clock.mark = None  # a shorter document over the longer one
    fields = clock.save(2)
    clock.close()
    assert json.loads(worker_ledger_path(tmp_path, 0).read_text()) == \
        json.loads(json.dumps(fields))


hostile = st.one_of(st.none(), st.booleans(), st.text(max_size=5), st.floats(),
                    st.integers(-10**20, 10**20), st.lists(st.integers(), max_size=2),
                    st.sampled_from([10**400, -10**400, 2**63, 1e308]))  # float() overflows


@given(st.dictionaries(st.sampled_from([*BUCKETS, "x"]), hostile, max_size=12), hostile, hostile,
       hostile)
def test_a_hostile_record_never_breaks_a_resume(
        ledger: dict[str, Any], start: Any, last: Any, mark: Any) -> None:
    previous = {"ledger": ledger, "ledger_start": start, "ledger_time": last,
                "ledger_checkpoint": mark}
    ticks = Ticks()
    clock = clock_at(ticks, previous)
    clock.resumed(0)
    out = clock.ledger()
    assert all(v >= 0 for b, v in out.items() if b != "unknown")
    parsed = ledger_from_record(json.loads(json.dumps(clock.record_fields())))
    assert parsed is not None and set(parsed.buckets) == set(BUCKETS)
