"""The scheduler behind a job: run.json's `scheduler`, Slurm's answers parsed, and the alert
when Slurm ended a job whose run.json still says running (test_slurm_states.py: the producer).

Pure: the command outputs below are Slurm 22.05's real formats (captured from the suite's own
slurmctld); tests/agent/test_slurm.py runs the real commands against a real cluster.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distcore.alerts.outcomes import agent_died
from distcore.jobs.agent import agent_record_from
from distcore.jobs.jsonify import scheduler_to_json
from distcore.jobs.judge import job_facts, judge_job
from distcore.jobs.scheduler import (
    SchedulerRef,
    SchedulerState,
    describe_scheduler,
    ended_long_enough,
    scheduler_ref_from,
    step_gone,
)
from distcore.jobs.slurm_text import (
    normalize_state,
    parse_sacct,
    parse_scontrol,
    parse_squeue,
    parse_squeue_steps,
    slurm_time,
)
from distcore.jobs.snapshots import Job
from distcore.textsafe import json_safe
from tests.core.slurm_outputs import (
    ENDED,
    SACCT,
    SCONTROL_BLOCKS,
    SCONTROL_ONELINER,
    SQUEUE,
    SQUEUE_STEPS,
)


@pytest.mark.parametrize(
    ("parse", "text", "expected"),
    [
        (parse_squeue, SQUEUE, {"4": ("CANCELLED", "Priority"), "2": ("COMPLETED", None),
                                "3": ("PENDING", "Resources"), "1": ("RUNNING", None)}),
        (parse_squeue, "", {}),
        (parse_squeue, "123_4|RUNNING|None\nnot a line\n9|running|x\n", {"9": ("RUNNING", "x")}),
        (parse_scontrol, SCONTROL_ONELINER, {"1": ("RUNNING", None),
                                             "3": ("PENDING", "Resources")}),
        (parse_scontrol, SCONTROL_BLOCKS, {"3": ("TIMEOUT", "TimeLimit"),
                                           "7": ("NODE_FAIL", "NodeDown")}),
        (parse_scontrol, "No jobs in the system\n", {}),
        (parse_sacct, SACCT, {"12": ("CANCELLED", None), "13": ("COMPLETED", None),
                              "14": ("OUT_OF_MEMORY", None), "15": ("RUNNING", None),
                              "16": ("CANCELLED", None)}),
    ],
)
def test_parsers(parse: Any, text: str, expected: dict[str, tuple[str, str | None]]) -> None:
    assert {j: (s.state, s.reason) for j, s in parse(text).items()} == expected


@pytest.mark.parametrize(
    ("parse", "text", "ended"),
    [
        (parse_squeue, SQUEUE, {"4": "2026-12-01T11:48:41", "2": ENDED, "3": None, "1": None}),
        (parse_scontrol, SCONTROL_ONELINER, {"1": None, "3": None}),
        (parse_scontrol, SCONTROL_BLOCKS, {"3": None, "7": ENDED}),
        (parse_sacct, SACCT, {"12": ENDED, "13": ENDED, "14": ENDED, "15": None, "16": None}),
    ],
)
def test_end_times_of_ended_jobs_only(parse: Any, text: str, ended: dict[str, str | None]) -> None:
    """Slurm's EndTime (local time) for ended jobs; a running job's is its limit, not an end."""
    found = {j: s.ended_at for j, s in parse(text).items()}
    assert found == {j: slurm_time(t) if t else None for j, t in ended.items()}
    assert slurm_time(ENDED) is not None and slurm_time("Unknown") is slurm_time("NONE") is None


@pytest.mark.parametrize(
    ("text", "state"),
    [("RUNNING", "RUNNING"), ("CANCELLED by 1000", "CANCELLED"), ("CANCELLED+", "CANCELLED"),
     ("node_fail", "NODE_FAIL"), ("", None), ("$(rm -rf)", None)],
)
def test_normalize_state(text: str, state: str | None) -> None:
    assert normalize_state(text) == state


@given(st.text(max_size=300))
def test_parsers_never_raise(text: str) -> None:
    for parse in (parse_squeue, parse_scontrol, parse_sacct):
        for job_id, state in parse(text).items():
            assert job_id.isdigit() and state.state.replace("_", "").isalpha()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"kind": "slurm", "job_id": "12", "step_id": "0", "node_list": "n[1-2]",
          "partition": "gpu"}, SchedulerRef("slurm", "12", "0", "n[1-2]", "gpu")),
        ({"kind": "kubernetes", "pod": "trainer-0"}, SchedulerRef("kubernetes", pod="trainer-0")),
        ({"kind": "slurm", "job_id": 12}, SchedulerRef("slurm", "12")),
        ({"kind": "slurm", "job_id": ["12"], "partition": True}, SchedulerRef("slurm")),
        ({"job_id": "12"}, None),
        ("slurm", None),
        (None, None),
    ],
)
def test_scheduler_ref_from_untrusted_json(value: Any, expected: SchedulerRef | None) -> None:
    assert scheduler_ref_from(value) == expected


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(st.sampled_from(["kind", "job_id", "step_id", "node_list", "partition",
                                        "pod", "other"]), JSON, max_size=7))
def test_any_scheduler_object_is_safe(value: dict[str, Any]) -> None:
    """From run.json to --once's JSON and the detail line: never an exception, always JSON."""
    agent = agent_record_from({"status": "running", "scheduler": value})
    assert agent is not None
    job = Job("j", None, {}, "running", agent, (), (),
              scheduler_state=SchedulerState("1", "RUNNING", "\ud800"))
    doc = scheduler_to_json(job)
    json.dumps(json_safe(doc), allow_nan=False)
    ref = agent.scheduler
    if ref is not None:
        assert isinstance(describe_scheduler(ref, job.scheduler_state), str)
        assert ref.slurm_job_id is None or ref.slurm_job_id.isdigit()


@pytest.mark.parametrize(
    ("job_id", "safe"),
    [("12", "12"), ("12\n", None), ("12; rm -rf /", None), ("-j1", None), ("1" * 13, None),
     (None, None)],
)
def test_only_plain_job_ids_reach_a_command(job_id: str | None, safe: str | None) -> None:
    assert SchedulerRef("slurm", job_id).slurm_job_id == safe
    assert SchedulerRef("kubernetes", job_id).slurm_job_id is None


def test_agent_record_carries_the_scheduler() -> None:
    record = agent_record_from({"status": "running",
                                "scheduler": {"kind": "slurm", "job_id": "5", "step_id": "0"}})
    assert record is not None and record.scheduler == SchedulerRef("slurm", "5", "0")


@pytest.mark.parametrize(
    ("status", "state", "alerted"),
    [
        ("running", "CANCELLED", True), ("running", "NODE_FAIL", True),
        ("running", "TIMEOUT", True), ("running", "COMPLETED", True),
        ("running", "RUNNING", False), ("running", "PENDING", False),
        ("stopped", "CANCELLED", False), ("finished", "COMPLETED", False),
        ("failed", "FAILED", False), (None, "CANCELLED", False),
    ],
)
def test_agent_died_rule(status: str | None, state: str, alerted: bool) -> None:
    ended = SchedulerState("12", state).ended
    alert = agent_died("job", status, "12", state, ended, 100.0)
    assert (alert is not None) == alerted
    if alert is not None:
        assert alert.severity == "critical" and alert.kind == "agent_died"
        assert f"Slurm job 12 is {state}" in alert.message
        assert "died without a word" in alert.message


@pytest.mark.parametrize(
    ("ref", "state", "line"),
    [
        (SchedulerRef("slurm", "12", "0", "n[1-2]", "gpu"), SchedulerState("12", "RUNNING"),
         "Slurm job 12 step 0 on n[1-2] (partition gpu): RUNNING"),
        (SchedulerRef("slurm", "12", "batch"), None, "Slurm job 12 step batch: state unknown"),
        (SchedulerRef("slurm", "3"), SchedulerState("3", "PENDING", "Resources"),
         "Slurm job 3: PENDING, Resources"),
        (SchedulerRef("kubernetes", pod="trainer-0"), None, "kubernetes pod trainer-0"),
    ],
)
def test_describe(ref: SchedulerRef, state: SchedulerState | None, line: str) -> None:
    assert describe_scheduler(ref, state) == line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (SQUEUE_STEPS, {"1": {"0", "batch"}, "2": {"batch"}}),
        ("", {}),
        ("12+0.0\n12_3.1\n12.extern\n12.TDB\n x.0\n13.7 \n", {"13": {"7"}}),
    ],
)
def test_parse_squeue_steps(text: str, expected: dict[str, set[str]]) -> None:
    assert parse_squeue_steps(text) == {j: frozenset(s) for j, s in expected.items()}


@given(st.text())
def test_parse_squeue_steps_never_raises(text: str) -> None:
    parse_squeue_steps(text)


LISTED = frozenset({"batch"})  # step 0 absent
BOTH = LISTED | {"0"}


def running(*listings: tuple[float, frozenset[str]], state: str = "RUNNING") -> SchedulerState:
    return SchedulerState("2", state, listings=listings)


@pytest.mark.parametrize(
    ("state", "step", "started", "gone"),
    [
        # absent from every listing of the last 30 s (or more), all after the step began
        (running((1000.0, LISTED), (1030.0, LISTED)), "0", 900.0, True),
        (running((990.0, BOTH), (1000.0, LISTED), (1030.0, LISTED)), "0", 900.0, True),
        (running((1000.0, LISTED), (1029.0, LISTED)), "0", 900.0, False),  # not settled yet
        (running((1000.0, LISTED), (1020.0, BOTH), (1030.0, LISTED)), "0", 900.0, False),
        (running((1030.0, LISTED),), "0", 900.0, False),  # one listing alone (--once)
        (running((1000.0, LISTED), (1030.0, LISTED)), "batch", 900.0, False),
        (running((1000.0, BOTH), (1030.0, BOTH)), "0", 900.0, False),
        # listings from before the step began (within the clocks' margin) prove nothing
        (running((1000.0, LISTED), (1030.0, LISTED)), "0", 995.0, False),
        (running((1000.0, LISTED), (1045.0, LISTED)), "0", 1030.0, False),
        (running((1000.0, LISTED), (1030.0, LISTED)), "0", None, False),
        (running(), "0", 900.0, False),  # steps not asked
        (running((1000.0, LISTED), (1030.0, LISTED), state="COMPLETED"), "0", 900.0, False),
        (running((1000.0, LISTED), (1030.0, LISTED)), None, 900.0, False),
        (running((1000.0, LISTED), (1030.0, LISTED)), "0;rm", 900.0, False),
        (None, "0", 900.0, False),
    ],
)
def test_step_gone_rule(state: SchedulerState | None, step: str | None, started: float | None,
                        gone: bool) -> None:
    assert step_gone(state, step, started) is gone


@pytest.mark.parametrize(
    ("state", "now", "settled"),
    [
        (SchedulerState("2", "FAILED", ended_at=1000.0), 1030.0, True),
        (SchedulerState("2", "FAILED", ended_at=1000.0), 1029.0, False),
        (SchedulerState("2", "FAILED"), 5000.0, False),  # no end time: not yet
        (SchedulerState("2", "RUNNING", ended_at=1000.0), 5000.0, False),
        (None, 5000.0, False),
    ],
)
def test_an_end_counts_once_it_settled(state: SchedulerState | None, now: float,
                                       settled: bool) -> None:
    """A shared filesystem may show run.json's `finished` late: the end must be 30 s old."""
    assert ended_long_enough(state, now) is settled


@pytest.mark.parametrize(
    ("status", "alerted"), [("running", True), ("finished", False), ("failed", False)]
)
def test_a_gone_step_of_a_running_job_is_agent_died(status: str, alerted: bool) -> None:
    """Through the judge: run.json's step, start time and status against squeue's listing."""
    from tests.tui.fixed import run, series

    agent = agent_record_from({"status": status, "start_time": 900.0,
                               "scheduler": {"kind": "slurm", "job_id": "2", "step_id": "0"}})
    facts = job_facts("j", {"train": run("j/train", series("loss", [1.0, 0.5]))}, agent, 1)
    state = running((1000.0, LISTED), (1030.0, LISTED))
    died = [a for a in judge_job(facts, 1030.0, [], {"2": state}).alerts
            if a.kind == "agent_died"]
    assert len(died) == int(alerted)
    if died:
        assert died[0].severity == "critical"
        assert "Slurm job 2 is RUNNING but its step 0, which ran distagent" in died[0].message
