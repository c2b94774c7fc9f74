"""SlurmStates, the scheduler's producer: which commands it runs for which jobs, what it
remembers across queries, and its errors. Slurm's commands are answered from captured outputs
(tests/core/slurm_outputs.py); tests/agent/test_slurm.py runs the real ones on a real cluster.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from distcore.jobs.scheduler import (
    ended_long_enough,
    step_gone,
)
from distcore.jobs.slurm_states import SlurmStates, find_command, trusted_path, whole_lines
from tests.core.slurm_outputs import SACCT, SACCT_DISABLED, SCONTROL_ONELINER, SQUEUE, SQUEUE_STEPS


class Commands:
    """Slurm's commands as the producer sees them: argv in, CompletedProcess out."""

    def __init__(self, answers: dict[str, tuple[int, str, str]], have: Sequence[str]) -> None:
        self.answers, self.have = answers, set(have)
        self.calls: list[list[str]] = []

    def which(self, name: str) -> str | None:
        return f"/usr/bin/{name}" if name in self.have else None

    def run(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        assert Path(argv[0]).is_absolute(), argv  # the path `which` found, never a bare name
        self.calls.append([Path(argv[0]).name, *argv[1:]])
        steps = "squeue --steps"
        key = steps if "--steps" in argv and steps in self.answers else Path(argv[0]).name
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

    states = SlurmStates(runner=hung, which=lambda name: f"/usr/bin/{name}")
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


@pytest.mark.parametrize(("path", "trusted"), [
    (None, ""),
    ("", ""),
    (":/usr/bin", "/usr/bin"),
    ("/usr/bin:", "/usr/bin"),
    ("/bin::/usr/bin", "/bin:/usr/bin"),
    (".:/usr/bin", "/usr/bin"),
    ("bin:./tools:/opt/slurm/bin", "/opt/slurm/bin"),
    ("/opt/slurm/bin:/usr/bin", "/opt/slurm/bin:/usr/bin"),
    (":.:", ""),
])
def test_trusted_path_keeps_only_absolute_elements(path: str | None, trusted: str) -> None:
    assert trusted_path(path) == trusted


@pytest.mark.parametrize(("text", "max_lines", "kept"), [
    ("", 3, ""),
    ("1|RUNNING\n", 3, "1|RUNNING\n"),
    ("1|RUNNING\n2|PENDING\n3|FAILED\n", 2, "1|RUNNING\n2|PENDING\n"),
    ("1|RUNNING\n2|PENDING\n", 2, "1|RUNNING\n2|PENDING\n"),
    ("1|RUNNING\n2|PENDING", 2, "1|RUNNING\n2|PENDING"),  # the exited command's last line
    ("1|RUNNING\n2|PENDING", 1, "1|RUNNING\n"),
    ("1|RUNNING\n" * 5, 0, ""),
])
def test_whole_lines_bounds_by_lines_never_mid_line(text: str, max_lines: int, kept: str) -> None:
    assert whole_lines(text, max_lines) == kept


def test_a_large_answer_is_cut_between_lines_not_inside_a_state() -> None:
    line = "1|RUNNING|None|Unknown\n"
    big = line * 200_000 + "2|RUNNING|None|Unknown\n"  # far past the bound
    cmds = Commands({"squeue": (0, big, "")}, have=("squeue",))
    states = SlurmStates(runner=cmds.run, which=cmds.which)
    states.track(["1", "2"])
    states.query_once()
    assert states.states()["1"].state == "RUNNING" and "2" not in states.states()


def test_a_squeue_planted_in_the_working_directory_never_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A logdir as working directory and PATH with an empty element (which means `.`): the
    planted `./squeue` is not found, so Slurm is absent and nothing runs."""
    marker = tmp_path / "planted-ran"
    planted = tmp_path / "squeue"
    # Shell builtins only: the PATH it would run under has no /bin.
    planted.write_text(f"#!/bin/sh\n: > {marker}\necho '1|RUNNING|None|Unknown'\n")
    planted.chmod(0o755)
    empty_bin = tmp_path / "bin"  # an absolute element with no Slurm in it
    empty_bin.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f":.:{empty_bin}")
    assert find_command("squeue") is None
    states = SlurmStates()  # the real which and runner
    states.track(["1"])
    states.query_once()
    assert not marker.exists() and states.states() == {} and states.errors() == ()
    # The same script on an absolute element is found by its absolute path and does run.
    monkeypatch.setenv("PATH", f":{tmp_path}")
    assert find_command("squeue") == str(planted)
    states.query_once()
    assert marker.exists() and states.states()["1"].state == "RUNNING"
