"""Which worker holds the others back: each worker's time to its gradients, scored.

In a synchronous job every step waits for the slowest worker: it spends its step getting its
gradients while the others wait in the reduction. Each worker's heartbeat holds per-step means
over its last ~10 s of log intervals, on its own clock: `compute_seconds` (input, forward and
backward, up to its gradients), `reduce_wait_seconds` (in the cross-replica reduction) and the
step's wall time, plus its best `compute_seconds` so far. Two scores per worker, 1 for the best:

- `relative`: the fastest worker's compute time over this one's (0.5: it takes twice as long);
- `own`: its own best compute time over its current one (it slowed since).

A straggler is named on either of two grounds:

- by the wait it causes: the slowest worker's compute time is STRAGGLER_RATIO or more the
  fastest's, the others wait STRAGGLER_WAIT_SHARE or more of each step (their time in the
  reduction beyond its own, which is the transfer every worker spends), and its extra time
  accounts for at least half of that wait (a wait that its extra time does not explain is not
  this worker's);
- by its compute time alone: COMPUTE_RATIO or more the median of the others', over heartbeat
  windows of at least MIN_WINDOW_STEPS steps each. Where a step is mostly its collectives, the
  faster workers' wait hides in their own compute time (the gradients' all-reduce starts while
  the backward pass runs, so a worker waiting for a peer's gradients is still "computing") and
  the caused wait reads small although the job runs at the slow worker's pace; a synchronous
  job always does. A window of many steps keeps one preempted interval from deciding.

Pure: no clock but the one passed in.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distcore.alerts import Alert
from distcore.alerts.workers import WorkerBeat

STRAGGLER_RATIO = 1.2
STRAGGLER_WAIT_SHARE = 0.10
EXPLAINED_SHARE = 0.5
COMPUTE_RATIO = 1.3
MIN_WINDOW_STEPS = 20


@dataclass(frozen=True)
class WorkerScore:
    worker: int
    host: str | None
    compute_seconds: float
    reduce_wait_seconds: float
    step_seconds: float
    relative: float
    own: float | None
    window_steps: int | None = None  # the steps its heartbeat's means are over

    @property
    def wait_share(self) -> float:
        return min(1.0, self.reduce_wait_seconds / self.step_seconds)

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "host": self.host, "compute_seconds": self.compute_seconds,
                "reduce_wait_seconds": self.reduce_wait_seconds,
                "step_seconds": self.step_seconds, "relative": self.relative, "own": self.own,
                "wait_share": self.wait_share, "window_steps": self.window_steps}


def _timed(beat: WorkerBeat) -> bool:
    return beat.compute_seconds is not None and beat.compute_seconds > 0 and \
        beat.reduce_wait_seconds is not None and beat.reduce_wait_seconds >= 0 and \
        beat.step_seconds is not None and beat.step_seconds > 0


def score_workers(beats: Sequence[WorkerBeat]) -> tuple[WorkerScore, ...]:
    """Every worker with timings, in worker order, scored against the fastest and its best."""
    timed = sorted((b for b in beats if _timed(b)), key=lambda b: b.worker)
    if not timed:
        return ()
    fastest = min(b.compute_seconds or 0.0 for b in timed)
    out = []
    for beat in timed:
        compute = beat.compute_seconds or 0.0
        best = beat.best_compute_seconds
        own = min(1.0, best / compute) if best is not None and best > 0 else None
        out.append(WorkerScore(beat.worker, beat.host, compute, beat.reduce_wait_seconds or 0.0,
                               beat.step_seconds or 0.0, fastest / compute, own,
                               beat.window_steps))
    return tuple(out)


@dataclass(frozen=True)
class Straggler:
    slow: WorkerScore
    fast: WorkerScore
    ratio: float
    others_wait: float

    def message(self) -> str:
        host = f" ({self.slow.host})" if self.slow.host else ""
        return (f"worker {self.slow.worker}{host} is the straggler: its steps take "
                f"{self.ratio:.1f}x worker {self.fast.worker}'s; the others wait "
                f"{self.others_wait:.0%} of each step")


def caused_wait(slow: WorkerScore, others: Sequence[WorkerScore]) -> float:
    """The others' mean wait in the reduction beyond the slowest worker's own time in it.

    The slowest worker reaches the reduction last and waits for nobody: its time there is the
    transfer itself, which every worker spends. What the others spend beyond it is the wait
    for the slowest worker (on a loaded host, or a slow network, the transfer alone can take
    longer than a worker's whole compute time, and no worker holds anybody back)."""
    return sum(max(0.0, s.reduce_wait_seconds - slow.reduce_wait_seconds)
               for s in others) / len(others)


def compute_bound_out(slow: WorkerScore, others: Sequence[WorkerScore]) -> bool:
    """Its compute time alone names it: COMPUTE_RATIO or more the others' median, every
    worker's figure a mean over MIN_WINDOW_STEPS steps or more."""
    if any((s.window_steps or 0) < MIN_WINDOW_STEPS for s in (slow, *others)):
        return False
    return slow.compute_seconds >= COMPUTE_RATIO * statistics.median(
        s.compute_seconds for s in others)


def find_straggler(scores: Sequence[WorkerScore]) -> Straggler | None:
    if len(scores) < 2:
        return None
    slow = max(scores, key=lambda s: (s.compute_seconds, -s.worker))
    fast = min(scores, key=lambda s: (s.compute_seconds, s.worker))
    others = [s for s in scores if s is not slow]
    ratio = slow.compute_seconds / fast.compute_seconds
    caused = caused_wait(slow, others)
    wait = sum(min(1.0, caused / s.step_seconds) for s in others) / len(others)
    extra = slow.compute_seconds - sum(s.compute_seconds for s in others) / len(others)
    by_wait = ratio >= STRAGGLER_RATIO and wait >= STRAGGLER_WAIT_SHARE and \
        extra >= EXPLAINED_SHARE * caused
    if not by_wait and not compute_bound_out(slow, others):
        return None
    return Straggler(slow, fast, ratio, wait)


def straggler_alert(job: str, beats: Sequence[WorkerBeat], now: float) -> Alert | None:
    """`straggler` (warning) from the live workers' heartbeat windows."""
    live = [b for b in beats if not b.stopped(now)]
    found = find_straggler(score_workers(live))
    if found is None:
        return None
    return Alert("straggler", "warning", job, found.message(), now)
