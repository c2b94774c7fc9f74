"""The workers' rules: a hang and on whom, the straggler scores, and run.json's `workers` read
as untrusted (hypothesis: any JSON value is read without an exception)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcore.alerts.stragglers import find_straggler, score_workers, straggler_alert
from distcore.alerts.workers import WorkerBeat, hang_culprits, hung_alert
from distcore.jobs.agent import agent_record_from
from distcore.jobs.workers import worker_beats_from

NOW = 10_000.0


def beat(worker: int, *, age: float = 1.0, phase: str | None = "computing", step: int = 40,
         ended: float = 30.0, hung: bool = False, hang: float = 10.0) -> WorkerBeat:
    return WorkerBeat(worker=worker, host=f"node{worker}", time=NOW - age, beat_seconds=2.0,
                      step=step, step_time=NOW - ended, hang_seconds=hang, phase=phase,
                      hung_since=NOW - ended + hang if hung else None,
                      stacks=f"stacks-worker-{worker}.txt" if hung else None)


@pytest.mark.parametrize(("beats", "named", "why"), [
    # worker 1 stopped (SIGSTOP): its heartbeat is 20 s old, worker 0 found the hang.
    ([beat(0, phase="reducing", hung=True), beat(1, age=20.0)], [1], "heartbeat stopped"),
    # worker 1 stuck in its input: alive, still computing, while worker 0 waits in the reduction.
    ([beat(0, phase="reducing", hung=True), beat(1, hung=True)], [1], "never reached"),
    # three workers, two of them stuck computing.
    ([beat(0, phase="reducing", hung=True), beat(1, hung=True), beat(2, hung=True)], [1, 2],
     "never reached"),
    # every live worker in the same phase: nobody can be named.
    ([beat(0, phase="reducing", hung=True), beat(1, phase="reducing", hung=True)], [], ""),
])
def test_hang_culprits(beats: list[WorkerBeat], named: list[int], why: str) -> None:
    culprits, waiting, reason = hang_culprits(beats, NOW)
    assert [b.worker for b in culprits] == named
    assert why in reason
    assert not {b.worker for b in waiting} & set(named)


@pytest.mark.parametrize(("beats", "expect"), [
    ([beat(0, phase="reducing", hung=True), beat(1, age=20.0)],
     "job hung after step 40: worker 1's heartbeat stopped 20 s ago; worker 0 waits for it; "
     "no step has ended for 30 s; 1 stack dump: /runs/j/stacks-worker-0.txt"),
    ([beat(0, phase="reducing", hung=True), beat(1, hung=True)],
     "job hung after step 40: worker 1 never reached the reduction of step 41; worker 0 waits "
     "for it; no step has ended for 30 s; 2 stack dumps: /runs/j/stacks-worker-0.txt, "
     "/runs/j/stacks-worker-1.txt"),
    # Nobody reported yet and every heartbeat is fresh: no hang (a slow step).
    ([beat(0, phase="reducing"), beat(1)], None),
    # The chief stopped too (run.json no longer changes): hung once past the hang limit...
    ([beat(0, age=30.0), beat(1, age=30.0)],
     "job hung after step 40: the heartbeats of workers 0 and 1 stopped 30 s ago (hung, or ended "
     "without a word: no worker answers); no step has ended for 30 s"),
    # ... not before it.
    ([beat(0, age=12.0, hang=20.0), beat(1, age=12.0, hang=20.0)], None),
    ([], None),
])
def test_hung_alert(beats: list[WorkerBeat], expect: str | None) -> None:
    alert = hung_alert("j", beats, NOW, "/runs/j")
    assert (alert.message if alert is not None else None) == expect
    if alert is not None:
        assert (alert.kind, alert.severity) == ("hung", "critical")


def timed(worker: int, compute: float, wait: float, *, best: float | None = None,
          step: float | None = None, steps: int | None = None) -> WorkerBeat:
    return WorkerBeat(worker=worker, host=f"gpu{worker}", time=NOW - 1, beat_seconds=2.0,
                      step_seconds=step or compute + wait, compute_seconds=compute,
                      reduce_wait_seconds=wait, best_compute_seconds=best or compute,
                      window_steps=steps)


def allreduce_bound(slow: float, *, steps: int | None = 600) -> list[WorkerBeat]:
    """A small MLP on two workers whose step is mostly its all-reduce: both steps take 16 ms
    (7 ms before worker 1 was throttled), worker 1's compute is `slow` times worker 0's, and
    worker 0's time in the reduction is 0.8 ms beyond worker 1's: 5% of the step."""
    return [timed(0, 0.0064, 0.0096, step=0.016, steps=steps),
            timed(1, 0.0064 * slow, 0.0088, step=0.016, steps=steps)]


@pytest.mark.parametrize(("beats", "expect"), [
    # worker 1 takes 1.4x worker 0's time to its gradients; worker 0 waits for it (40 ms of
    # its 45 ms in the reduction: the 5 ms worker 1 spends there is the transfer).
    ([timed(0, 0.100, 0.045), timed(1, 0.140, 0.005)],
     "worker 1 (gpu1) is the straggler: its steps take 1.4x worker 0's; the others wait 28% "
     "of each step"),
    # 1.3x, four workers: the three others wait.
    ([timed(0, 0.10, 0.035), timed(1, 0.10, 0.035), timed(2, 0.13, 0.005),
      timed(3, 0.10, 0.035)],
     "worker 2 (gpu2) is the straggler: its steps take 1.3x worker 0's; the others wait 22% "
     "of each step"),
    # 2x on a slow network: the 40 ms transfer is every worker's, the 20 ms beyond it is the
    # wait for worker 1, which its extra 20 ms explains.
    ([timed(0, 0.020, 0.060), timed(1, 0.040, 0.040)],
     "worker 1 (gpu1) is the straggler: its steps take 2.0x worker 0's; the others wait 25% "
     "of each step"),
    # Healthy: within 10% of each other.
    ([timed(0, 0.100, 0.012), timed(1, 0.108, 0.004)], None),
    # Slower, but the others hardly wait (the reduction is not held): nobody is named.
    ([timed(0, 0.100, 0.002), timed(1, 0.140, 0.001)], None),
    # Everybody waits in the reduction much longer than one worker's extra time: the network.
    ([timed(0, 0.010, 0.200), timed(1, 0.013, 0.197)], None),
    ([timed(0, 0.1, 0.01)], None),  # one worker has nobody to hold back
    # Single log intervals of a healthy two-worker job on a loaded 2-core machine (ms): one
    # worker's preempted interval reads 1.3-1.4x the other's, but it waited in the reduction
    # as long as the other (or longer): nobody waited for it.
    ([timed(0, 0.0077, 0.0027), timed(1, 0.0099, 0.0031)], None),
    ([timed(0, 0.0109, 0.0054), timed(1, 0.0077, 0.0034)], None),
    ([timed(0, 0.0061, 0.0021), timed(1, 0.0076, 0.0078)], None),
])
def test_straggler(beats: list[WorkerBeat], expect: str | None) -> None:
    alert = straggler_alert("j", beats, NOW)
    assert (alert.message if alert is not None else None) == expect


@pytest.mark.parametrize(("beats", "expect"), [
    # The all-reduce-bound job: the caused wait reads 5%, under its 10% bar, yet the job runs
    # at worker 1's pace: named by its compute time.
    (allreduce_bound(1.5), "worker 1 (gpu1) is the straggler: its steps take 1.5x worker 0's; "
                           "the others wait 5% of each step"),
    (allreduce_bound(1.3), "worker 1 (gpu1) is the straggler: its steps take 1.3x worker 0's; "
                           "the others wait 5% of each step"),
    # Healthy noise between two workers over full windows: nobody.
    (allreduce_bound(1.1), None),
    (allreduce_bound(1.25), None),
    # Too few steps behind the means (or none said): one preempted interval could decide.
    (allreduce_bound(1.5, steps=10), None),
    (allreduce_bound(1.5, steps=None), None),
    # Three workers: worker 2 against the others' median, not the fastest alone (1.55x).
    ([timed(0, 0.0060, 0.0064, steps=600), timed(1, 0.0075, 0.0064, steps=600),
      timed(2, 0.0096, 0.0061, steps=600)],
     "worker 2 (gpu2) is the straggler: its steps take 1.6x worker 0's; the others wait 2% "
     "of each step"),
    ([timed(0, 0.0060, 0.0064, steps=600), timed(1, 0.0085, 0.0064, steps=600),
      timed(2, 0.0093, 0.0061, steps=600)], None),
])
def test_a_straggler_by_its_compute_time(beats: list[WorkerBeat], expect: str | None) -> None:
    alert = straggler_alert("j", beats, NOW)
    assert (alert.message if alert is not None else None) == expect


def test_scores_against_the_fastest_and_its_own_best() -> None:
    scores = score_workers([timed(1, 0.2, 0.0, best=0.1), timed(0, 0.1, 0.1)])
    assert [(s.worker, s.relative, s.own) for s in scores] == [(0, 1.0, 1.0), (1, 0.5, 0.5)]
    assert scores[0].wait_share == 0.5
    found = find_straggler(scores)
    assert found is not None and (found.slow.worker, found.fast.worker) == (1, 0)


def test_a_stopped_worker_is_not_scored() -> None:
    beats = [timed(0, 0.1, 0.04), WorkerBeat(**{**timed(1, 0.2, 0.0).__dict__, "time": NOW - 60})]
    assert straggler_alert("j", beats, NOW) is None


def test_run_json_workers_are_read() -> None:
    doc = {"status": "running", "workers": {
        "0": {"worker": 0, "host": "a", "time": 5.0, "step": 7, "phase": "reducing",
              "perf": {"compute_seconds": 0.1, "reduce_wait_seconds": 0.02,
                       "step_seconds": 0.12},
              "hung": {"since": 4.0, "stacks": "stacks-worker-0.txt"}},
        "1": {"worker": 1, "phase": "sleeping", "hung": {"stacks": "../../etc/passwd"}},
        "2": {"worker": True}, "3": "no"}}
    record = agent_record_from(doc)
    assert record is not None
    first, second = record.workers
    assert (first.worker, first.host, first.step, first.phase, first.stacks, first.hung_since) \
        == (0, "a", 7, "reducing", "stacks-worker-0.txt", 4.0)
    assert first.compute_seconds == 0.1
    assert (second.worker, second.phase, second.stacks) == (1, None, None)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=6),
    max_leaves=12)
FIELDS = st.fixed_dictionaries({}, optional={
    k: JSON for k in ("worker", "host", "time", "beat_seconds", "step", "step_time",
                      "hang_seconds", "phase", "perf", "hung")})


@settings(max_examples=40, deadline=None)
@given(st.one_of(JSON, st.dictionaries(st.text(max_size=3), FIELDS, max_size=5)),
       st.floats(allow_nan=False, allow_infinity=False))
def test_any_workers_value_is_read_and_judged_without_an_exception(value: Any, now: float) -> None:
    beats = worker_beats_from(json.loads(json.dumps(value, allow_nan=True)))
    assert all(isinstance(b, WorkerBeat) and b.worker >= 0 for b in beats)
    alert = hung_alert("j", beats, now, "/d")
    straggler_alert("j", beats, now)
    if alert is not None:
        assert alert.message.isprintable()
