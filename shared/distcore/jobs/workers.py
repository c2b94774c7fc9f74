"""run.json's `workers`: each worker's heartbeat as the chief copied it, read as untrusted.

A field of the wrong type is unknown (None); an entry without an integer worker index is left
out; the stacks file must be a plain `stacks-worker-<i>.txt` name (a path would let a hostile
run.json point the dashboard anywhere).
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

from distcore.alerts.workers import WorkerBeat

MAX_WORKERS: Final = 4096
_STACKS = re.compile(r"stacks-worker-[0-9]{1,6}\.txt")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _beat(doc: dict[str, Any]) -> WorkerBeat | None:
    worker = _int(doc.get("worker"))
    if worker is None or worker < 0:
        return None
    perf = _table(doc.get("perf"))
    hung = _table(doc.get("hung"))
    stacks = hung.get("stacks")
    host = doc.get("host")
    phase = doc.get("phase")
    return WorkerBeat(
        worker=worker,
        host=host if isinstance(host, str) else None,
        time=_number(doc.get("time")),
        beat_seconds=_positive(doc.get("beat_seconds")),
        step=_int(doc.get("step")),
        step_time=_number(doc.get("step_time")),
        hang_seconds=_positive(doc.get("hang_seconds")),
        phase=phase if phase in ("computing", "reducing") else None,
        step_seconds=_number(perf.get("step_seconds")),
        compute_seconds=_number(perf.get("compute_seconds")),
        reduce_wait_seconds=_number(perf.get("reduce_wait_seconds")),
        best_compute_seconds=_number(perf.get("best_compute_seconds")),
        window_steps=_int(perf.get("steps")),
        hung_since=_number(hung.get("since")),
        stacks=stacks if isinstance(stacks, str) and _STACKS.fullmatch(stacks) else None,
    )


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _positive(value: Any) -> float | None:
    number = _number(value)
    return number if number is not None and number > 0 else None


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
