"""Numbers from files made safe once, at the edge (distcore.bounded), and a job whose files
cannot be understood shown as such on its own row while every other job is judged as ever.

The front ends over a hostile logdir, as a user runs them: tests/tui/test_hostile_values.py.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcore import bounded, names
from distcore.events import LogdirWatcher, RunStore
from distcore.jobs import index as index_module
from distcore.jobs import judge
from distcore.jobs.index import JobIndex
from distcore.jobs.jsonify import index_to_json
from distcore.jobs.ledger import BUCKETS
from distcore.jobs.snapshots import JobsSnapshot
from distcore.metrics import snapshot_families
from distmon.once import render_text
from distmon.render.view_model import job_rows
from distmon.widgets.panels import render_alerts, render_details
from tests.kit.writers import write_job

HUGE = int("9" * 400)


@pytest.mark.parametrize(
    ("value", "lo", "hi", "expected"),
    [
        (1, -10.0, 10.0, 1.0),
        (2.5, 0.0, 10.0, 2.5),
        (HUGE, -math.inf, math.inf, None),  # float() of it raises OverflowError
        (-HUGE, -math.inf, math.inf, None),
        (2**63, -math.inf, math.inf, None),
        (2**63 - 1, -math.inf, math.inf, float(2**63 - 1)),
        (math.inf, -math.inf, math.inf, None),
        (-math.inf, -math.inf, math.inf, None),
        (math.nan, -math.inf, math.inf, None),
        (1e308, 0.0, bounded.MAX_SECONDS, None),
        (True, 0.0, 10.0, None),  # a bool is an int in Python, never a number in run.json
        ("1", 0.0, 10.0, None),
        (None, 0.0, 10.0, None),
        ([1], 0.0, 10.0, None),
        (-0.5, 0.0, 1.0, None),
        (1.5, 0.0, 1.0, None),
        (5e-324, 0.0, 1.0, 5e-324),
    ],
)
def test_bounded_float(value: Any, lo: float, hi: float, expected: float | None) -> None:
    assert bounded.bounded_float(value, lo, hi) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 0), (7, 7), (-1, -1), (2**63 - 1, 2**63 - 1), (2**63, None), (-(2**63) - 1, None),
     (HUGE, None), (True, None), (3.0, None), (math.nan, None), ("3", None)],
)
def test_step(value: Any, expected: int | None) -> None:
    assert bounded.step(value) == expected


@pytest.mark.parametrize(
    ("tag", "value", "expected"),
    [
        (names.MFU, 0.4, 0.4), (names.MFU, -5.0, None), (names.MFU, 1.5, None),
        (names.MFU, math.inf, None), (names.MFU, math.nan, None), (names.MFU, 1e40, None),
        (names.INPUT_WAIT_FRACTION, 1e40, None), (names.INPUT_WAIT_FRACTION, 1.0, 1.0),
        (names.STEP_TIME_MS, -1.0, None), (names.STEP_TIME_MS, 120.0, 120.0),
        (names.EXAMPLES_PER_SECOND, math.inf, None), ("loss", 1e40, 1e40),
        ("loss", math.nan, None),
    ],
)
def test_perf_value_keeps_each_tag_in_its_documented_range(
    tag: str, value: float, expected: float | None
) -> None:
    assert bounded.perf_value(tag, value) == expected


# --- through the job index: any number in run.json, beside a normal job -------------------------

NUMBERS = (
    st.sampled_from([HUGE, -HUGE, 2**63, 1e308, -1e308, 5e-324, True, math.inf, -math.inf,
                     math.nan, 0, -1])
    | st.integers()
    | st.integers(min_value=10**300, max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
)


def _table(*keys: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=dict.fromkeys(keys, NUMBERS))


WORKER = st.builds(
    lambda beat, perf, since: {**beat, "perf": perf, "hung": {"since": since}},
    _table("worker", "time", "step", "step_time", "beat_seconds", "hang_seconds"),
    _table("step_seconds", "compute_seconds", "reduce_wait_seconds", "best_compute_seconds"),
    NUMBERS,
)
RUN_JSON = st.builds(
    lambda top, plan, ledger, worker, recovery: {
        "status": "running", **top, "plan": plan, "ledger": ledger,
        "workers": {"0": {"worker": 0, **worker}}, "recoveries": [recovery],
    },
    _table("last_step", "start_time", "end_time", "pid", "total_steps", "ledger_wall",
           "ledger_time"),
    _table("replicas", "global_batch_size", "learning_rate", "base_learning_rate",
           "per_replica_batch_size", "warmup_epochs"),
    _table(*BUCKETS),
    WORKER,
    _table("step", "lr_before", "lr_after", "restored_step"),
)


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two jobs' event files, written once: `hostile` (its run.json drawn per example) and
    `normal`, failed, whose alert must survive whatever the other holds."""
    root = tmp_path_factory.mktemp("events")
    write_job(root, "hostile", [1.0, 0.9, 0.8])
    write_job(root, "normal", [1.0, 0.9, 0.8])
    (root / "normal" / "run.json").write_text(
        json.dumps({"status": "failed", "last_step": 2, "error": "out of memory"}))
    return root


def index_of(root: Path) -> tuple[JobIndex, JobsSnapshot]:
    store = RunStore()
    LogdirWatcher([root], store).scan_once()
    index = JobIndex(store, logdirs=[str(root)])
    snap = index.refresh()
    assert snap is not None
    return index, snap


def assert_every_front_end_holds(index: JobIndex, snap: JobsSnapshot) -> None:
    assert not index.errors(), index.errors()
    assert [j.name for j in snap.jobs] == ["hostile", "normal"]
    assert ("normal", "job_failed") in {(a.run, a.kind) for a in snap.alerts}
    doc = {"runs": [], "logdirs": [], "gpus": {}, "host": None, **index_to_json(snap)}
    json.loads(json.dumps(doc, allow_nan=False))  # valid JSON, whatever the input
    render_text(snap, io.StringIO())
    job_rows(snap.jobs)  # the dashboard's table, details (its ledger bar) and alerts
    for job in snap.jobs:
        render_details(job, snap.alerts)
    render_alerts(snap.alerts, snap.errors)
    for family in snapshot_families(snap):
        for sample in family.samples:
            if sample.name.endswith("_ratio"):
                assert 0 <= sample.value <= 1, sample
            if sample.name == "distmon_job_time_seconds":
                assert 0 <= sample.value <= bounded.MAX_SECONDS, sample


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=RUN_JSON)
def test_any_numbers_in_run_json_leave_the_other_job_and_every_output_whole(
    events: Path, doc: dict[str, Any]
) -> None:
    (events / "hostile" / "run.json").write_text(json.dumps(doc))  # NaN, Infinity as tokens
    index, snap = index_of(events)
    assert_every_front_end_holds(index, snap)
    hostile = snap.jobs[0]
    assert hostile.status == "running" and hostile.agent is not None
    ledger = hostile.agent.ledger
    if ledger is not None:
        known = [v for v in ledger.buckets.values() if v is not None]
        assert all(0 <= v <= bounded.MAX_SECONDS for v in known)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{\"status\": \"running\", ", "run.json: not JSON"),
        (b"[1, 2]", "run.json: not a JSON object"),
        (b"[" * 100 + b"]" * 100, "run.json: not JSON: nested deeper than 64 levels"),
    ],
)
def test_a_run_json_that_cannot_be_read_is_its_own_row_saying_so(
    tmp_path: Path, content: bytes, why: str
) -> None:
    write_job(tmp_path, "hostile", [1.0, 0.9])
    write_job(tmp_path, "normal", [1.0, 0.9], status="failed")
    (tmp_path / "hostile" / "run.json").write_bytes(content)
    index, snap = index_of(tmp_path)
    assert [(j.name, j.status) for j in snap.jobs] == [("hostile", "unreadable"),
                                                        ("normal", "failed")]
    (said,) = [a for a in snap.alerts if a.run == "hostile"]
    assert said.kind == "unreadable" and why in said.message
    assert_every_front_end_holds(index, snap)


def test_a_job_that_judging_raises_for_is_its_own_row_and_the_others_are_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the rules fail to foresee in one job's data: that job says so on its row."""
    write_job(tmp_path, "hostile", [1.0, 0.9])
    write_job(tmp_path, "normal", [1.0, 0.9], status="failed")
    rule = judge.run_stalled

    def fails_for_hostile(run: Any, *args: Any) -> Any:
        if run.name.startswith("hostile"):
            raise OverflowError("int too large to convert to float")
        return rule(run, *args)

    monkeypatch.setattr(judge, "run_stalled", fails_for_hostile)
    index, snap = index_of(tmp_path)
    assert [(j.name, j.status) for j in snap.jobs] == [("hostile", "unreadable"),
                                                        ("normal", "failed")]
    said = [a.message for a in snap.alerts if a.run == "hostile"]
    assert said == ["could not be understood: OverflowError: int too large to convert to float"]
    assert_every_front_end_holds(index, snap)


def test_a_clock_rule_that_raises_for_one_job_leaves_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_job(tmp_path, "hostile", [1.0, 0.9])
    write_job(tmp_path, "normal", [1.0, 0.9], status="failed")
    rule = index_module.clock_free

    def fails_for_hostile(facts: Any, now: float) -> bool:
        if facts.name == "hostile":
            raise OverflowError("int too large to convert to float")
        return rule(facts, now)

    monkeypatch.setattr(index_module, "clock_free", fails_for_hostile)
    index, snap = index_of(tmp_path)
    assert [(j.name, j.status) for j in snap.jobs] == [("hostile", "unreadable"),
                                                        ("normal", "failed")]
    assert_every_front_end_holds(index, snap)


def test_facts_that_raise_for_one_job_leave_the_others_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_job(tmp_path, "hostile", [1.0, 0.9])
    write_job(tmp_path, "normal", [1.0, 0.9], status="failed")
    outcome = judge._outcome

    def fails_for_hostile(name: str, *args: Any) -> Any:
        if name == "hostile":
            raise ValueError("no rule foresaw this")
        return outcome(name, *args)

    monkeypatch.setattr(judge, "_outcome", fails_for_hostile)
    index, snap = index_of(tmp_path)
    assert [(j.name, j.status) for j in snap.jobs] == [("hostile", "unreadable"),
                                                        ("normal", "failed")]
    assert_every_front_end_holds(index, snap)
