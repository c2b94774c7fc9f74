"""A job's ledger as distmon reads it: run.json's (untrusted), the `time/` tags', or what real
event files of a resumed run prove; through the index into `--once --json`, the goodput
column and the Prometheus families."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcore.jobs.jsonify import to_json
from distcore.jobs.ledger import (
    BUCKETS,
    gaps_between,
    ledger_from_record,
    ledger_from_scalars,
)
from distcore.metrics import snapshot_families
from distcore.table import compare_row
from tests.core.test_jobs_index import index_over, snapshot

FULL = {"startup": 20.0, "compute": 60.0, "input_wait": 5.0, "checkpoint": 3.0, "restore": 1.0,
        "evaluation": 4.0, "recovery": 0.0, "lost": 2.0, "scheduler": 4.0, "teardown": 0.5,
        "unknown": 0.5}  # fmt: skip


@pytest.mark.parametrize(("doc", "wall", "goodput", "unknown"), [
    ({"ledger": FULL, "ledger_wall": 100.0}, 100.0, 0.6, 0.5),
    ({"ledger": FULL}, 100.0, 0.6, 0.5),  # no wall: the buckets' sum, every one being known
    ({"ledger": {**FULL, "unknown": -0.2}}, None, None, None),  # clocks disagreed: not known
    ({"ledger": {**FULL, "compute": "60"}, "ledger_wall": 100.0}, 100.0, None, 0.5),
    ({"ledger": {**FULL, "compute": math.inf}}, None, None, 0.5),
    ({"ledger": {**FULL, "compute": True}}, None, None, 0.5),
    ({"ledger": {**FULL, "compute": 500.0}, "ledger_wall": 100.0}, 100.0, 1.0, 0.5),  # capped
])
def test_run_json_ledger(doc: dict[str, Any], wall: float | None, goodput: float | None,
                         unknown: float | None) -> None:
    ledger = ledger_from_record(doc)
    assert ledger is not None
    assert (ledger.wall_seconds, ledger.goodput, ledger.buckets["unknown"]) == \
        (wall, goodput if goodput is None else pytest.approx(goodput), unknown)


@pytest.mark.parametrize("doc", [{}, {"ledger": None}, {"ledger": [1]},
                                 {"ledger": {"compute": "x"}}, {"ledger": {"other": 1.0}}])
def test_no_readable_bucket_is_no_ledger(doc: dict[str, Any]) -> None:
    assert ledger_from_record(doc) is None


def test_the_time_tags_make_a_ledger() -> None:
    ledger = ledger_from_scalars({f"time/{b}": v for b, v in FULL.items()})
    assert ledger is not None and ledger.wall_seconds == pytest.approx(100.0)
    partial = ledger_from_scalars({"time/compute": 5.0})
    assert partial is not None and partial.wall_seconds is None and partial.goodput is None


@pytest.mark.parametrize(("times", "gaps", "seconds"), [
    ([0, 1, 2, 3, 4, 5], 0, 0.0),
    ([0, 1, 2, 3, 123, 124, 125], 1, 119.0),  # a restart: 2 minutes without a point
    ([0, 10, 20, 30, 60, 70], 0, 0.0),  # 30 s: three intervals, not ten
    ([0, 1, 2, 50, 51, 52, 200, 201], 2, 47.0 + 147.0),
    ([0, 1], 0, 0.0),
    ([0, math.nan, 1, 2], 0, 0.0),
])
def test_gaps_between_points(times: list[float], gaps: int, seconds: float) -> None:
    assert gaps_between(times) == (gaps, pytest.approx(seconds))


def write_points(run_dir: Path, times: list[float]) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(run_dir))
    for step, at in enumerate(times):
        writer.add_scalar("loss", 1.0 / (step + 1), step, walltime=at)
    writer.close()


def test_a_logdir_distagent_did_not_write(tmp_path: Path) -> None:
    """Keras-like events of a run resumed after five minutes, and a distagent job's run.json:
    the first gets only its span and gap, every bucket unknown; the second its ledger."""
    start = 1.7e9
    write_points(tmp_path / "keras" / "train", [start + i for i in range(20)]
                 + [start + 320 + i for i in range(20)])
    write_points(tmp_path / "agent" / "train", [start + i for i in range(5)])
    (tmp_path / "agent" / "run.json").write_text(json.dumps(
        {"status": "running", "ledger": FULL, "ledger_wall": 100.0, "goodput": 0.6}))
    index, _ = index_over(tmp_path)
    snap = snapshot(index)
    doc = to_json(snap)
    by_name = {j["name"]: j["ledger"] for j in doc["jobs"]}
    keras, agent = by_name["keras"], by_name["agent"]
    assert keras["source"] == "events" and keras["wall_seconds"] == pytest.approx(339.0)
    assert (keras["gaps"], keras["gap_seconds"]) == (1, pytest.approx(300.0))
    assert keras["goodput"] is None and set(keras["seconds"].values()) == {None}
    assert agent["source"] == "agent" and agent["seconds"] == FULL and agent["goodput"] == 0.6
    rows = {j.name: compare_row(j) for j in snap.jobs}
    assert rows["agent"].get("goodput") == pytest.approx(0.6)
    assert rows["keras"].get("goodput") is None
    families = {f.name: f for f in snapshot_families(snap)}
    seconds = {(s.labels["job"], s.labels["bucket"]): s.value
               for s in families["distmon_job_time_seconds"].samples}
    assert seconds == {("agent", b): v for b, v in FULL.items()}  # nothing for "keras"
    goodput = {s.labels["job"]: s.value for s in families["distmon_job_goodput_ratio"].samples}
    assert goodput == {"agent": pytest.approx(0.6)}


hostile = st.one_of(st.none(), st.booleans(), st.text(max_size=4), st.floats(),
                    st.integers(-10**30, 10**30), st.lists(st.floats(), max_size=2),
                    st.dictionaries(st.text(max_size=3), st.floats(), max_size=2))


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: Any) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    write_points(root / "job" / "train", [1.7e9 + i for i in range(3)])
    return root


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from([*BUCKETS, "x"]), hostile, max_size=12) | hostile,
       hostile, hostile)
def test_a_hostile_ledger_through_the_json_document(one_run: Path, ledger: Any, wall: Any,
                                                    goodput: Any) -> None:
    (one_run / "job" / "run.json").write_text(json.dumps(
        {"status": "running", "ledger": ledger, "ledger_wall": wall, "goodput": goodput},
        allow_nan=True))
    index, _ = index_over(one_run)
    snap = snapshot(index)
    (job,) = json.loads(json.dumps(to_json(snap), allow_nan=False))["jobs"]  # strict JSON
    found = job["ledger"]
    assert found is not None  # run.json's, or else what the three points prove
    assert all(v is None or v >= 0 for v in found["seconds"].values())
    assert found["goodput"] is None or 0 <= found["goodput"] <= 1
    families = {f.name: f for f in snapshot_families(snap)}
    assert all(math.isfinite(s.value) and s.value >= 0
               for s in families["distmon_job_time_seconds"].samples)
