"""The heartbeat thread with real threads and files (no TensorFlow): its beats, a hang's stack
dump naming the stuck code, the chief's copy of every worker into run.json, and the abort."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from distagent.train.heartbeat import (
    ABORT_WAIT_BEATS,
    EXIT_HUNG,
    HangSettings,
    Heartbeat,
    hang_limit,
)
from distagent.train.phases import PhaseProbe
from distcore import names
from tests.kit.wait import wait_until


@pytest.mark.parametrize(("configured", "call", "limit"), [
    ("auto", None, 60.0), ("auto", 0.5, 60.0), ("auto", 9.0, 90.0), (3.0, 9.0, 3.0),
    (0.25, None, 0.25)])
def test_hang_limit(configured: str | float, call: float | None, limit: float) -> None:
    assert hang_limit(configured, call) == limit


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def stuck_in_user_layer(release: threading.Event) -> None:
    release.wait(30)


def test_a_hang_dumps_every_stack_then_aborts(tmp_path: Path) -> None:
    release = threading.Event()
    user = threading.Thread(target=stuck_in_user_layer, args=(release,), name="user")
    user.start()
    (tmp_path / names.heartbeat_name(1)).write_text(json.dumps({"worker": 1, "step": 3}))
    published: list[dict[str, Any]] = []
    aborted: list[tuple[str, int]] = []
    exits: list[int] = []

    def exit_process(code: int) -> None:
        exits.append(code)

    beat = Heartbeat(tmp_path, worker=0, workers=2,
                     settings=HangSettings(hang_seconds=0.4, on_hang="abort", beat_seconds=0.05),
                     probe=PhaseProbe(lambda: (3, 4), interval=0.05),
                     on_abort=lambda message, step: aborted.append((message, step)),
                     publish=published.append, exit_process=exit_process)
    try:
        with beat:
            for step in (1, 2, 3):
                beat.step_ended(step)
            wait_until(lambda: exits)
    finally:
        release.set()
        user.join()
    assert exits == [EXIT_HUNG]
    stacks = (tmp_path / names.stacks_name(0)).read_text()
    assert stacks.startswith("worker 0 (pid ")
    assert "stuck_in_user_layer" in stacks and "test_heartbeat.py" in stacks
    [(message, step)] = aborted
    assert step == 3 and "after step 3" in message and names.stacks_name(0) in message
    workers = published[-1]
    assert set(workers) == {"0", "1"} and workers["1"] == {"worker": 1, "step": 3}
    mine = workers["0"]
    assert (mine["step"], mine["reached"], mine["phase"]) == (3, 4, "reducing")
    assert mine["hung"]["stacks"] == names.stacks_name(0) and mine["hang_seconds"] == 0.4



def test_stacks_that_cannot_be_written_go_to_stderr_and_the_job_still_aborts(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / names.stacks_name(0) / "planted").mkdir(parents=True)  # no file replaces it
    release = threading.Event()
    user = threading.Thread(target=stuck_in_user_layer, args=(release,), name="user")
    user.start()
    aborted: list[tuple[str, int]] = []
    exits: list[int] = []
    beat = Heartbeat(tmp_path, worker=0, workers=1,
                     settings=HangSettings(hang_seconds=0.4, on_hang="abort", beat_seconds=0.05),
                     on_abort=lambda message, step: aborted.append((message, step)),
                     exit_process=exits.append)
    try:
        with beat:
            beat.step_ended(1)
            wait_until(lambda: exits)
    finally:
        release.set()
        user.join()
    assert exits == [EXIT_HUNG]
    [(message, _)] = aborted
    assert message.endswith("stacks on stderr")
    assert "stuck_in_user_layer" in capfd.readouterr().err
    assert read_json(tmp_path / names.heartbeat_name(0))["hung"]["stacks"] is None

def test_warn_keeps_going_and_a_step_that_ends_clears_the_hang(tmp_path: Path) -> None:
    beat = Heartbeat(tmp_path, worker=1, workers=2, is_chief=False,
                     settings=HangSettings(hang_seconds=0.3, on_hang="warn", beat_seconds=0.05),
                     exit_process=lambda code: pytest.fail("warn must not exit"))
    path = tmp_path / names.heartbeat_name(1)
    with beat:
        beat.step_ended(5)
        hung = wait_until(lambda: (read_json(path) or {}).get("hung"))
        assert hung["step"] == 5 and (tmp_path / names.stacks_name(1)).exists()
        beat.step_ended(6)
        wait_until(lambda: (read_json(path) or {}).get("step") == 6 and
                   read_json(path)["hung"] is None)
    assert not (tmp_path / names.RUN_JSON).exists()  # not the chief: no run.json


def test_nothing_is_hung_before_the_first_step(tmp_path: Path) -> None:
    beat = Heartbeat(tmp_path, worker=0, workers=1,
                     settings=HangSettings(hang_seconds=0.05, beat_seconds=0.02))
    with beat:
        wait_until(lambda: read_json(tmp_path / names.heartbeat_name(0)))
        time.sleep(0.2)  # many beats past the limit, and still no step: compiling, not hung
    record = read_json(tmp_path / names.heartbeat_name(0))
    assert record["hung"] is None and record["step"] is None
    assert not (tmp_path / names.stacks_name(0)).exists()


def test_waiting_in_the_first_reduction_arms_the_clock(tmp_path: Path) -> None:
    """No step has ended yet, but this worker holds its first gradients (its compilation is
    over) and waits: a peer stuck before its first step is a hang too."""
    beat = Heartbeat(tmp_path, worker=0, workers=2,
                     settings=HangSettings(hang_seconds=0.2, beat_seconds=0.05),
                     probe=PhaseProbe(lambda: (0, 1), interval=0.02))
    with beat:
        hung = wait_until(lambda: (read_json(tmp_path / names.heartbeat_name(0)) or {}).get("hung"))
    assert hung["step"] is None and (tmp_path / names.stacks_name(0)).exists()


def test_the_chiefs_abort_names_the_worker_that_never_reached_the_reduction(
    tmp_path: Path
) -> None:
    (tmp_path / names.heartbeat_name(1)).write_text(json.dumps(
        {"worker": 1, "step": 3, "time": time.time() + 60, "phase": "computing"}))
    aborted: list[str] = []
    beat = Heartbeat(tmp_path, worker=0, workers=2,
                     settings=HangSettings(hang_seconds=0.2, on_hang="abort", beat_seconds=0.05),
                     probe=PhaseProbe(lambda: (3, 4), interval=0.02),
                     on_abort=lambda message, step: aborted.append(message),
                     exit_process=lambda code: None)
    with beat:
        beat.step_ended(3)
        wait_until(lambda: aborted)
    assert aborted[0].startswith("worker 1: never reached the reduction; no step ended for 0.2 s")


@pytest.mark.parametrize(("peer", "waits"), [
    ("hung", False),  # already said so: leave at once
    ("hung later", False),  # finds it a moment after this worker: leave once it says so
    ("running", True),  # never says so (stopped, dead): leave after the bound
    ("hung before", True),  # an earlier attempt's heartbeat proves nothing
])
def test_an_abort_waits_for_the_other_workers_to_find_the_hang(
    tmp_path: Path, peer: str, waits: bool
) -> None:
    """Leaving at once would cut a peer's collective before that peer found the hang: it would
    end `failed` ("lost worker 0"), not `hung`."""
    settings = HangSettings(hang_seconds=0.2, on_hang="abort", beat_seconds=0.2)
    peer_path = tmp_path / names.heartbeat_name(1)

    def write_peer(hung: bool, at: float) -> None:
        doc = {"worker": 1, "step": 3, "time": at, "hung": {"step": 3} if hung else None}
        peer_path.write_text(json.dumps(doc))

    write_peer(peer == "hung" or peer == "hung before",
               time.time() - 3600 if peer == "hung before" else time.time() + 60)
    aborted: list[float] = []
    exits: list[tuple[float, bool]] = []

    def on_abort(message: str, step: int) -> None:
        aborted.append(time.monotonic())
        if peer == "hung later":
            threading.Timer(0.1, write_peer, (True, time.time() + 60)).start()

    def exit_process(code: int) -> None:
        said = (read_json(peer_path) or {}).get("hung") is not None
        exits.append((time.monotonic(), said))

    beat = Heartbeat(tmp_path, worker=0, workers=2, settings=settings,
                     probe=PhaseProbe(lambda: (3, 4), interval=0.02), on_abort=on_abort,
                     exit_process=exit_process)
    with beat:
        beat.step_ended(3)
        wait_until(lambda: exits)
    [(left, said)] = exits
    bound = ABORT_WAIT_BEATS * settings.beat_seconds
    assert (left - aborted[0] >= bound) is waits, (left - aborted[0], bound)
    assert said is (peer != "running")
