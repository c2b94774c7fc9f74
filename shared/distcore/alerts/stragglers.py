"""Which worker holds the others back: each worker's time to its gradients, scored.

In a synchronous job every step waits for the slowest worker: it spends its step getting its
gradients while the others wait in the reduction. Each worker's heartbeat holds per-step means
over its last ~10 s of log intervals, on its own clock: `compute_seconds` (input, forward and
backward, up to its gradients), `reduce_wait_seconds` (in the cross-replica reduction) and the
step's wall time, plus its best `compute_seconds` so far. Two scores per worker, 1 for the best:

- `relative`: the fastest worker's compute time over this one's (0.5: it takes twice as long);
- `own`: its own best compute time over its current one (it slowed since).

A straggler is named when the slowest worker's compute time is STRAGGLER_RATIO or more the
fastest's, the others wait for it STRAGGLER_WAIT_SHARE or more of each step (their time in the
reduction beyond its own, which is the transfer every worker spends), and its extra time
accounts for at least half of that wait (a wait that its extra time does not explain is not
this worker's). Pure: no clock but the one passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distcore.alerts import Alert
from distcore.alerts.workers import WorkerBeat

STRAGGLER_RATIO = 1.2
STRAGGLER_WAIT_SHARE = 0.10
EXPLAINED_SHARE = 0.5


@dataclass(frozen=True)
class WorkerScore:
    worker: int
    host: str | None
    compute_seconds: float
    reduce_wait_seconds: float
    step_seconds: float
    relative: float
    own: float | None

    @property
    def wait_share(self) -> float:
        return min(1.0, self.reduce_wait_seconds / self.step_seconds)

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "host": self.host, "compute_seconds": self.compute_seconds,
                "reduce_wait_seconds": self.reduce_wait_seconds,
                "step_seconds": self.step_seconds, "relative": self.relative, "own": self.own,
                "wait_share": self.wait_share}


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
                               beat.step_seconds or 0.0, fastest / compute, own))
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
    if ratio < STRAGGLER_RATIO or wait < STRAGGLER_WAIT_SHARE or extra < EXPLAINED_SHARE * caused:
        return None
    return Straggler(slow, fast, ratio, wait)


def straggler_alert(job: str, beats: Sequence[WorkerBeat], now: float) -> Alert | None:
    """`straggler` (warning) from the live workers' heartbeat windows."""
    live = [b for b in beats if not b.stopped(now)]
    found = find_straggler(score_workers(live))
    if found is None:
        return None
    return Alert("straggler", "warning", job, found.message(), now)
