"""A job's workers from their heartbeats: a hang, and on whom.

distagent's workers each write a heartbeat every few seconds (the chief copies them all into
run.json's `workers`): the last step that ended and when, where the current step stands
(`computing`: this worker has not yet got its gradients; `reducing`: it holds them and waits in
the cross-replica reduction for the others) and, once no step has ended for the job's
`hang_seconds`, that it found the job hung and where it wrote its Python stacks.

`hung_alert` names the worker holding the others: one whose heartbeat stopped (stopped by a
signal, its machine gone), else one still computing while the others wait in the reduction for
it (stuck in its input or its model). Pure: `now` is passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from distcore.alerts import Alert
from distcore.wording import counted

STALE_BEATS = 5
"""A heartbeat older than this many beats has stopped (run.json's copy lags one or two)."""
STALE_MIN_SECONDS = 10.0
HANG_DEFAULT_SECONDS = 60.0
PHASE_COMPUTING = "computing"
PHASE_REDUCING = "reducing"


@dataclass(frozen=True)
class WorkerBeat:
    """One worker's heartbeat as run.json holds it (every field optional: it is untrusted)."""

    worker: int
    host: str | None = None
    time: float | None = None
    beat_seconds: float | None = None
    step: int | None = None
    step_time: float | None = None
    hang_seconds: float | None = None
    phase: str | None = None
    step_seconds: float | None = None
    compute_seconds: float | None = None
    reduce_wait_seconds: float | None = None
    best_compute_seconds: float | None = None
    window_steps: int | None = None
    """How many steps its step, compute and reduce-wait means are over."""
    hung_since: float | None = None
    stacks: str | None = None
    """The stacks file's name in the run directory (a plain name, checked when read)."""

    def describe(self) -> str:
        return f"worker {self.worker}" + (f" ({self.host})" if self.host else "")

    def stopped(self, now: float) -> bool:
        """Its heartbeat has stopped: none for STALE_BEATS beats."""
        limit = max(STALE_BEATS * (self.beat_seconds or 2.0), STALE_MIN_SECONDS)
        return self.time is None or now - self.time > limit


def _names(beats: Sequence[WorkerBeat]) -> str:
    """"worker 1", "workers 1 and 2", "workers 0, 2 and 3"."""
    numbers = [str(b.worker) for b in beats]
    if len(numbers) == 1:
        return f"worker {numbers[0]}"
    return f"workers {', '.join(numbers[:-1])} and {numbers[-1]}"


def hang_culprits(beats: Sequence[WorkerBeat], now: float
                  ) -> tuple[list[WorkerBeat], list[WorkerBeat], str]:
    """(the workers holding the job, those waiting for them, why the first are named)."""
    stopped = [b for b in beats if b.stopped(now)]
    live = [b for b in beats if not b.stopped(now)]
    if stopped and live:
        return stopped, live, "heartbeat stopped"
    if stopped:
        return stopped, [], "heartbeat stopped"
    computing = [b for b in live if b.phase == PHASE_COMPUTING]
    reducing = [b for b in live if b.phase == PHASE_REDUCING]
    if computing and reducing:
        return computing, reducing, "never reached the reduction"
    return [], live, ""


def _is_hung(beats: Sequence[WorkerBeat], now: float) -> bool:
    """A live worker found the job hung, or a heartbeat stopped for longer than the hang limit
    (the chief's own stops too, and with it run.json: no worker can report then)."""
    for beat in beats:
        limit = beat.hang_seconds or HANG_DEFAULT_SECONDS
        if beat.stopped(now):
            if beat.time is not None and now - beat.time > limit:
                return True
        elif beat.hung_since is not None:
            return True
    return False


def hung_alert(job: str, beats: Sequence[WorkerBeat], now: float,
               directory: str | None = None, last_step: int | None = None) -> Alert | None:
    """`hung` (critical) while the job's workers say no step has ended for hang_seconds,
    naming who holds it and where the stacks are (`directory`: the run directory, as shown).
    `last_step`: run.json's, the step the dashboard shows for the job, quoted when given (the
    heartbeats' own step, written between run.json's writes, otherwise)."""
    if not beats or not _is_hung(beats, now):
        return None
    culprits, waiting, why = hang_culprits(beats, now)
    ended = [b.step_time for b in beats if b.step_time is not None]
    last = max(ended) if ended else None
    steps = [b.step for b in beats if b.step is not None]
    quoted = last_step if last_step is not None else max(steps, default=None)
    at = f" after step {quoted}" if quoted is not None else ""
    parts = [f"job hung{at}"]
    if culprits and why == "heartbeat stopped":
        ago = [now - b.time for b in culprits if b.time is not None]
        whose = f"{_names(culprits)}'s heartbeat" if len(culprits) == 1 \
            else f"the heartbeats of {_names(culprits)}"
        parts.append(f"{whose} stopped"
                     + (f" {max(ago):.0f} s ago" if ago else "")
                     + (" (hung, or ended without a word: no worker answers)"
                        if not waiting else ""))
    elif culprits:
        reach = f" of step {max(steps) + 1}" if steps else ""
        parts.append(f"{_names(culprits)} never reached the reduction{reach}")
    else:
        parts.append("no worker is named: every live worker is in the same phase")
    if culprits and waiting:
        parts.append(f"{_names(waiting)} {'waits' if len(waiting) == 1 else 'wait'} for it")
    if last is not None:
        parts.append(f"no step has ended for {max(0.0, now - last):.0f} s")
    stacks = [b.stacks for b in beats if b.stacks]
    if stacks:
        where = (directory.rstrip("/") + "/") if directory else ""
        parts.append(f"{counted(len(stacks), 'stack dump')}: "
                     + ", ".join(where + s for s in stacks))
    sinces = [b.hung_since for b in beats if b.hung_since is not None]
    since = min(sinces) if sinces else last
    return Alert("hung", "critical", job, parts[0] + ": " + "; ".join(parts[1:]), since)
