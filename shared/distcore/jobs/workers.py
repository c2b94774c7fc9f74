"""run.json's `workers`: each worker's heartbeat as the chief copied it, read as untrusted.

A field of the wrong type is unknown (None); an entry without an integer worker index is left
out; the stacks file must be a plain `stacks-worker-<i>.txt` name (a path would let a hostile
run.json point the dashboard anywhere).
"""

from __future__ import annotations

import re
from typing import Any, Final

from distcore import bounded
from distcore.alerts.workers import WorkerBeat

MAX_WORKERS: Final = 4096
MAX_WORKER_INDEX: Final = 999_999  # as many digits as a stacks file's name may hold
_STACKS = re.compile(r"stacks-worker-[0-9]{1,6}\.txt")


def _beat(doc: dict[str, Any]) -> WorkerBeat | None:
    worker = bounded.bounded_int(doc.get("worker"), 0, MAX_WORKER_INDEX)
    if worker is None:
        return None
    perf = _table(doc.get("perf"))
    hung = _table(doc.get("hung"))
    stacks = hung.get("stacks")
    host = doc.get("host")
    phase = doc.get("phase")
    return WorkerBeat(
        worker=worker,
        host=host if isinstance(host, str) else None,
        time=bounded.timestamp(doc.get("time")),
        beat_seconds=bounded.positive_seconds(doc.get("beat_seconds")),
        step=bounded.step(doc.get("step")),
        step_time=bounded.timestamp(doc.get("step_time")),
        hang_seconds=bounded.positive_seconds(doc.get("hang_seconds")),
        phase=phase if phase in ("computing", "reducing") else None,
        step_seconds=bounded.seconds(perf.get("step_seconds")),
        compute_seconds=bounded.seconds(perf.get("compute_seconds")),
        reduce_wait_seconds=bounded.seconds(perf.get("reduce_wait_seconds")),
        best_compute_seconds=bounded.seconds(perf.get("best_compute_seconds")),
        window_steps=bounded.bounded_int(perf.get("steps"), 0),
        hung_since=bounded.timestamp(hung.get("since")),
        stacks=stacks if isinstance(stacks, str) and _STACKS.fullmatch(stacks) else None,
    )


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def worker_beats_from(value: Any) -> tuple[WorkerBeat, ...]:
    """The well-formed heartbeats of run.json's `workers` (an object by index), by worker."""
    if not isinstance(value, dict):
        return ()
    beats = {}
    for item in list(value.values())[:MAX_WORKERS]:
        beat = _beat(item) if isinstance(item, dict) else None
        if beat is not None:
            beats[beat.worker] = beat
    return tuple(beats[k] for k in sorted(beats))
