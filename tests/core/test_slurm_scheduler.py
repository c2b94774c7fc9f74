"""The scheduler behind a job: run.json's `scheduler`, Slurm's answers parsed, the producer, and
the alert when Slurm ended a job whose run.json still says running.

Pure: the command outputs below are Slurm 22.05's real formats (captured from the suite's own
slurmctld); tests/agent/test_slurm.py runs the real commands against a real cluster.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Sequence
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
from distcore.jobs.slurm_states import SlurmStates
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

SQUEUE = """4|CANCELLED|Priority|2026-12-01T11:48:41
2|COMPLETED|None|2026-12-01T11:48:40
3|PENDING|Resources|NONE
1|RUNNING|None|NONE
"""
SCONTROL_ONELINER = (
    "JobId=1 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 "
    "Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 "
    "Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:07 TimeLimit=UNLIMITED\n"
    "JobId=3 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901757 "
    "Nice=0 Account=(null) QOS=(null) JobState=PENDING Reason=Resources Dependency=(null)\n"
)
SCONTROL_BLOCKS = """JobId=3 JobName=wrap
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   Priority=4294901757 Nice=0 Account=(null) QOS=(null)
   JobState=TIMEOUT Reason=TimeLimit Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0

JobId=7 JobName=train
   JobState=NODE_FAIL Reason=NodeDown Dependency=(null)
   StartTime=2026-12-01T11:48:38 EndTime=2026-12-01T11:48:40 Deadline=N/A
"""
SACCT = ("12|CANCELLED by 0|2026-12-01T11:48:40\n13|COMPLETED|2026-12-01T11:48:40\n"
         "14|OUT_OF_MEMORY|2026-12-01T11:48:40\n15|RUNNING|Unknown\n16|CANCELLED+|Unknown\n")
ENDED = "2026-12-01T11:48:40"
# `squeue --noheader --steps --format=%i --jobs=1,2` with job 1's batch script and step 0
# running, and job 2 a batch script whose srun step 0 ended (captured from the suite's cluster).
SQUEUE_STEPS = "1.0\n1.batch\n2.batch\n"
# What this machine's sacct answers without slurmdbd (exit 1), and its parsable2 format where a
# database answers (JobIDRaw|State, one line per allocation).
SACCT_DISABLED = "Slurm accounting storage is disabled\n"


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


class Commands:
    """Slurm's commands as the producer sees them: argv in, CompletedProcess out."""

    def __init__(self, answers: dict[str, tuple[int, str, str]], have: Sequence[str]) -> None:
        self.answers, self.have = answers, set(have)
        self.calls: list[list[str]] = []

    def which(self, name: str) -> str | None:
        return f"/usr/bin/{name}" if name in self.have else None

    def run(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        steps = "squeue --steps"
        key = steps if "--steps" in argv and steps in self.answers else argv[0]
        code, out, err = self.answers[key]
        return subprocess.CompletedProcess(list(argv), code, out, err)


def test_one_squeue_for_all_jobs_then_sacct_for_the_forgotten() -> None:
    cmds = Commands({"squeue": (0, SQUEUE, ""), "sacct": (0, SACCT, ""),
                     "squeue --steps": (0, SQUEUE_STEPS, "")}, have=("squeue", "sacct"))
    states = SlurmStates(runner=cmds.run, which=cmds.which, clock=lambda: 1000.0)
    assert states.query_once() is False and cmds.calls == []  # nothing followed: nothing asked
    states.track(["1", "3", "12", "bad id"])
    assert states.query_once()
    assert [c[0] for c in cmds.calls] == ["squeue", "sacct", "squeue"]
    assert "--jobs=1,3,12" in cmds.calls[0] and "--jobs=12" in cmds.calls[1]
    assert "--steps" in cmds.calls[2] and "--jobs=1" in cmds.calls[2]  # the running one only
    found = states.states()
    assert {j: s.state for j, s in found.items()} == {
        "1": "RUNNING", "3": "PENDING", "12": "CANCELLED"}
    assert found["1"].steps == {"0", "batch"} and found["1"].steps_at == 1000.0
    assert found["3"].steps is None and found["3"].ended_at is None
    assert found["12"].ended_at is not None  # sacct's End
    assert states.errors() == ()


def test_a_failed_step_listing_is_no_evidence() -> None:
    cmds = Commands({"squeue": (0, SQUEUE, ""),
                     "squeue --steps": (1, "", "slurm_load_jobs error: Socket timed out\n")},
                    have=("squeue",))
    states = SlurmStates(runner=cmds.run, which=cmds.which)
    states.track(["1"])
    states.query_once()
    assert states.states()["1"].steps is None
    assert not step_gone(states.states()["1"], "0", 0.0)


@pytest.mark.parametrize(
    ("answers", "error"),
    [
        ({"squeue": (1, "", "slurm_load_jobs error: Invalid job id specified\n")}, None),
        ({"squeue": (1, "", "slurm_load_jobs error: Unable to contact slurm controller\n")},
         "squeue exited 1: slurm_load_jobs error: Unable to contact slurm controller"),
    ],
)
def test_controller_errors(answers: dict[str, tuple[int, str, str]], error: str | None) -> None:
    cmds = Commands({**answers, "sacct": (1, "", SACCT_DISABLED)},
                    have=("squeue", "sacct"))
    states = SlurmStates(runner=cmds.run, which=cmds.which)
    states.track(["5"])
    states.query_once()
    states.query_once()
    assert states.states() == {}
    assert [e.message for e in states.errors()] == ([error] if error else [])
    assert sum(c[0] == "sacct" for c in cmds.calls) == 1  # no accounting database: asked once


def test_scontrol_when_squeue_is_missing_and_nothing_without_slurm() -> None:
    cmds = Commands({"scontrol": (0, SCONTROL_ONELINER, "")}, have=("scontrol",))
    states = SlurmStates(runner=cmds.run, which=cmds.which)
    states.track(["3"])
    states.query_once()
    assert {j: s.state for j, s in states.states().items()} == {"3": "PENDING"}
    none = Commands({}, have=())
    quiet = SlurmStates(runner=none.run, which=none.which)
    quiet.track(["3"])
    quiet.query_once()
    assert none.calls == [] and quiet.states() == {} and quiet.errors() == ()


def test_a_hung_squeue_is_an_error_not_a_hang() -> None:
    def hung(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        raise subprocess.TimeoutExpired(list(argv), 10.0)

    states = SlurmStates(runner=hung, which=lambda name: name)
    states.track(["1"])
    states.query_once()
    assert "gave no answer" in states.errors()[0].message


def test_thread_asks_when_a_new_job_appears_and_closes() -> None:
    asked = threading.Event()
    cmds = Commands({"squeue": (0, SQUEUE, "")}, have=("squeue",))

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        asked.set()
        return cmds.run(argv)

    states = SlurmStates(interval=3600.0, runner=run, which=cmds.which)
    states.start()
    try:
        states.track(["1"])  # new: wakes the thread long before its interval
        assert asked.wait(10.0)
    finally:
        states.close()
    assert states.states()["1"].state == "RUNNING"


def test_listings_and_first_heard_ends_are_remembered_across_queries() -> None:
    """The producer keeps each running job's recent step listings (so that absence over 30 s
    can be told) and, where Slurm gives no end time, when it first heard of the end."""
    now = [1000.0]
    answers = {"squeue": (0, "1|RUNNING|None|NONE\n", ""),
               "squeue --steps": (0, "1.batch\n", "")}
    cmds = Commands(answers, have=("squeue",))
    states = SlurmStates(runner=cmds.run, which=cmds.which, clock=lambda: now[0])
    states.track(["1"])
    for at in (1000.0, 1015.0, 1031.0):
        now[0] = at
        states.query_once()
    state = states.states()["1"]
    assert [at for at, _ in state.listings] == [1000.0, 1015.0, 1031.0]
    assert step_gone(state, "0", 900.0) and not step_gone(state, "batch", 900.0)
    answers["squeue"] = (0, "1|FAILED|NonZeroExitCode|Unknown\n", "")
    for at in (1040.0, 1080.0):
        now[0] = at
        states.query_once()
    state = states.states()["1"]
    assert state.ended_at == 1040.0 and state.listings == ()
    assert ended_long_enough(state, 1080.0) and not ended_long_enough(state, 1060.0)
