"""Training-health alerts: a gradient spike against its recent median, and each rollback
distagent recorded in run.json, table-tested; run.json's `recoveries` read as untrusted."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest

from distcore import names
from distcore.alerts.outcomes import recovered
from distcore.alerts.series import gradient_spike, series_alerts
from distcore.jobs.agent import agent_record_from, recoveries_from
from distcore.jobs.judge import job_facts
from distcore.jobs.snapshots import RecoveryNote
from tests.tui import fixed

NOW = 10_000.0
STEADY = [1.0, 1.2, 0.9, 1.1, 1.0, 0.95, 1.05, 1.0]


def grad_run(values: Sequence[float]) -> Any:
    return fixed.run("r", fixed.series(names.GRAD_NORM, values, end=NOW, every=1.0, step_every=1))


@pytest.mark.parametrize(("values", "fires"), [
    (STEADY, False),
    ([*STEADY, 9.9], False),  # below ten times the median (1.0)
    ([*STEADY, 10.5], True),
    ([*STEADY, 10.5, 1.0, 1.1], True),  # a spike in the tail stays reported
    ([1.0, 1.0, 1.0, 50.0], False),  # too few points before it for a median
    ([*STEADY, math.nan], False),
    ([*STEADY, math.inf], False),  # a non-finite norm is the divergence rule's, not a spike
    ([0.0] * 8 + [1.0], False),  # a zero median has no ratio
    ([1.0], False),
])
def test_gradient_spike(values: list[float], fires: bool) -> None:
    found = gradient_spike(grad_run(values))
    assert (found is not None) is fires
    if found is not None:
        assert found.kind == "gradient_spike" and found.severity == "warning"
        assert "gradient spike" in found.message and "recent median 1" in found.message
        assert found in series_alerts(grad_run(values))


def test_no_grad_norm_no_spike() -> None:
    assert gradient_spike(fixed.run("r", fixed.series(names.LOSS, STEADY))) is None


def test_the_newest_spike_is_the_one_reported() -> None:
    values = [*STEADY, 20.0, *STEADY, 30.0, 1.0]
    found = gradient_spike(grad_run(values))
    assert found is not None and f"at step {len(STEADY) * 2 + 1}" in found.message


@pytest.mark.parametrize(("note", "message"), [
    (RecoveryNote(40, 0.04, 0.02, 30),
     "recovered from divergence at step 40 (lr 0.04 → 0.02), rolled back to step 30"),
    (RecoveryNote(7, None, 0.02, None), "recovered from divergence at step 7"),
])
def test_recovered(note: RecoveryNote, message: str) -> None:
    (found,) = recovered("job", [note], 5.0)
    assert (found.kind, found.severity, found.run, found.since) == ("recovered", "warning", "job",
                                                                    5.0)
    assert found.message == message


@pytest.mark.parametrize(("value", "steps"), [
    (None, []), ("x", []), ({"step": 1}, []), ([1, "a", None, {}], []),
    ([{"step": True}], []), ([{"step": 1.5}], []),
    ([{"step": 3, "lr_before": "big", "lr_after": math.nan, "restored_step": -1.0}], [3]),
    ([{"step": i} for i in range(1000)], list(range(900, 1000))),
])
def test_recoveries_from_untrusted_run_json(value: Any, steps: list[int]) -> None:
    notes = recoveries_from(value)
    assert [n.step for n in notes] == steps
    assert all(n.lr_before is None or math.isfinite(n.lr_before) for n in notes)


def test_the_judge_raises_one_warning_per_recovery() -> None:
    doc = {"status": "finished", "end_time": 9.0, "recoveries": [
        {"step": 6, "lr_before": 0.04, "lr_after": 0.02, "restored_step": 4},
        {"step": 9, "lr_before": 0.02, "lr_after": 0.01, "restored_step": 8}]}
    agent = agent_record_from(doc)
    parts = {"train": fixed.run("j/train", fixed.series(names.LOSS, [1.0, 0.9], end=NOW))}
    facts = job_facts("j", parts, agent, 1)
    found = [a.message for a in facts.point_alerts if a.kind == "recovered"]
    assert found == ["recovered from divergence at step 6 (lr 0.04 → 0.02), rolled back to step 4",
                     "recovered from divergence at step 9 (lr 0.02 → 0.01), rolled back to step 8"]
