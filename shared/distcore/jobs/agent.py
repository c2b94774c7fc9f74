"""distagent's run.json, read into an `AgentRecord` — on the job index's thread, cached by mtime,
and which jobs' run.json a refresh looks at (`due_checks`).

run.json is untrusted (anyone may write a logdir): every field is checked for its type, and every
number for its range once, here (distcore.bounded); a field of the wrong type or out of range is
unknown (None), never an exception. A run.json that cannot be read or understood is a record
that says why (`unreadable`): its job's row says so. Strings stay as written; the front ends
escape them (distcore.textsafe) when they show them.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from distcore import bounded, names
from distcore.alerts.input_advice import pipeline_facts
from distcore.jobs.ledger import ledger_from_record
from distcore.jobs.scheduler import scheduler_ref_from
from distcore.jobs.snapshots import AgentRecord, Prices, RecoveryNote
from distcore.jobs.workers import worker_beats_from
from distcore.safefile import load_json

MAX_RUN_JSON_BYTES: Final = 16 * 1024 * 1024  # a config and a plan: far below this
AGENT_CHECK_SHARE = 10  # a dormant job without run.json is looked at every ~10 refreshes
AGENT_CHECK_MIN = 500  # ... and at least this many of them each refresh
log = logging.getLogger(__name__)
NO_SUCH_FILE: Final = "no such file"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    return bounded.bounded_int(value, 0)


# run.json's other fields the front ends show, each read through its bound (distcore.bounded).
EXTRA_FIELDS: Final[dict[str, Callable[[Any], Any]]] = {
    "host": _str,
    "pid": _count,
    "pid_create_time": bounded.timestamp,
    "start_time": bounded.timestamp,
    "end_time": bounded.timestamp,
    "total_steps": _count,
    "message": _str,
}
_int = bounded.bounded_int
_number = bounded.bounded_float


def provenance(plan: Mapping[str, Any]) -> str | None:
    """How the learning rate was obtained, e.g. `0.01 @ batch 32 × 4 replicas (linear) = 0.04`."""
    given = _str(plan.get("learning_rate_provenance")) or _str(plan.get("provenance"))
    if given is not None:
        return given
    lr, base = _number(plan.get("learning_rate")), _number(plan.get("base_learning_rate"))
    if lr is None:
        return None
    if base is None:
        return f"{lr:g}"
    batch, replicas = _count(plan.get("per_replica_batch_size")), _count(plan.get("replicas"))
    rule = _str(plan.get("scaling_rule")) or "?"
    return f"{base:g} @ batch {batch} × {replicas} replicas ({rule}) = {lr:.4g}"


# Comparison column -> where run.json holds it: ("plan" | "config", key path).
AGENT_HPARAMS: Final = (
    ("lr", ("plan", "learning_rate")),
    ("lr_rule", ("plan", "scaling_rule")),
    ("base_lr", ("plan", "base_learning_rate")),
    ("warmup_epochs", ("plan", "warmup_epochs")),
    ("global_batch", ("plan", "global_batch_size")),
    ("per_replica_batch", ("plan", "per_replica_batch_size")),
    ("replicas", ("plan", "replicas")),
    ("workers", ("plan", "workers")),
    ("model", ("config", "model", "name")),
    ("optimizer", ("config", "optimizer", "name")),
    ("lr_decay", ("config", "optimizer", "decay")),
    ("strategy", ("config", "strategy", "kind")),
)


def _at(doc: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = doc
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def agent_hparams(doc: Mapping[str, Any]) -> dict[str, float | int | str]:
    """distagent's plan and config as comparison columns; a field of another type (or a
    non-finite number) is left out: run.json is untrusted."""
    out: dict[str, float | int | str] = {}
    for column, path in AGENT_HPARAMS:
        value = _at(doc, path)
        if isinstance(value, str) or _int(value) is not None:
            out[column] = value
        elif (number := _number(value)) is not None:
            out[column] = number
    return out


def agent_record_from(doc: Any) -> AgentRecord | None:
    """An AgentRecord from a parsed run.json, or None when it is not an object. Never raises:
    a field that no reader here foresaw makes a record that says why it is unreadable."""
    if not isinstance(doc, dict):
        return None
    try:
        return _record(doc)
    except Exception as err:  # the data's fault: this job's row says so, the others go on
        log.debug("run.json not understood", exc_info=True)
        return unreadable_record(err)


def unreadable_record(why: Exception | str) -> AgentRecord:
    """The record of a run.json that could not be understood, and why (in a few words)."""
    text = why if isinstance(why, str) else f"run.json: {type(why).__name__}: {why}"
    return AgentRecord(unreadable=text[:200])


def _record(doc: dict[str, Any]) -> AgentRecord:
    nested = doc.get("plan")
    plan: Mapping[str, Any] = nested if isinstance(nested, dict) else doc
    found = {k: read(doc.get(k)) for k, read in EXTRA_FIELDS.items()}
    extra = {k: v for k, v in found.items() if v is not None}
    return AgentRecord(
        status=_str(doc.get("status")),
        replicas=_count(plan.get("replicas")),
        global_batch_size=_count(plan.get("global_batch_size")),
        learning_rate=provenance(plan),
        last_step=bounded.step(doc.get("last_step")),
        error=_str(doc.get("error")),
        extra=extra,
        scheduler=scheduler_ref_from(doc.get("scheduler")),
        recoveries=recoveries_from(doc.get("recoveries")),
        hparams=agent_hparams(doc),
        mixed_precision=mixed if isinstance(mixed := plan.get("mixed_precision"), bool)
        else None,
        workers=worker_beats_from(doc.get("workers")),
        ledger=ledger_from_record(doc),
        pipeline=pipeline_facts(plan.get("pipeline")),
        prices=recorded_prices(doc.get("config")),
    )


def recorded_prices(config: Any) -> Prices:
    """run.json's `config.cost` prices (distagent's `[cost]`); 0 or unreadable: none."""
    cost = config.get("cost") if isinstance(config, dict) else None
    if not isinstance(cost, dict):
        return Prices()
    found = [bounded.price(cost.get(k)) for k in ("price_gpu_hour", "price_kwh")]
    return Prices(*(p if p else None for p in found))



MAX_RECOVERIES_SHOWN: Final = 100  # a hostile run.json may list millions


def recoveries_from(value: Any) -> tuple[RecoveryNote, ...]:
    """run.json's `recoveries`: entries with an integer step; other fields unknown when odd."""
    if not isinstance(value, list):
        return ()
    notes = []
    for item in value[-MAX_RECOVERIES_SHOWN:]:
        step = bounded.step(item.get("step")) if isinstance(item, dict) else None
        if step is not None:
            notes.append(RecoveryNote(
                step=step, lr_before=_number(item.get("lr_before")),
                lr_after=_number(item.get("lr_after")),
                restored_step=bounded.step(item.get("restored_step"))))
    return tuple(notes)


def read_run_json(job_dir: Path) -> dict[str, Any] | None:
    """A job's run.json as written, or None when there is none or it is unreadable, too big,
    nested too deep, not a regular file (a FIFO would hang a plain `open`), a symbolic link
    (distagent writes a file, never a link) or not a JSON object: anyone who can write the
    logdir can write it, so nothing in it is trusted. The one reader of the file for distmon and
    distagent alike (`distcore.safefile`)."""
    return read_run_json_or_why(job_dir)[0]


def read_run_json_or_why(job_dir: Path) -> tuple[dict[str, Any] | None, str]:
    """`read_run_json`, and when it is None, why in a few words ("no such file", "a FIFO, not
    a regular file", "not JSON: ...") for a command's one error line."""
    try:
        doc = load_json(Path(job_dir) / names.RUN_JSON, MAX_RUN_JSON_BYTES)
    except FileNotFoundError:
        return None, NO_SUCH_FILE
    except OSError as err:
        return None, err.strerror or type(err).__name__
    except ValueError as err:
        return None, f"not JSON: {str(err)[:120]}"
    if not isinstance(doc, dict):
        return None, "not a JSON object"
    return doc, ""


def read_agent_record(job_dir: Path) -> AgentRecord | None:
    """The job's run.json; None when it has none (not written by distagent); a record that
    says why when it is there but cannot be read or understood."""
    doc, why = read_run_json_or_why(job_dir)
    if doc is None:
        return None if why == NO_SUCH_FILE else unreadable_record(f"run.json: {why}")
    return agent_record_from(doc)


class AgentRecords:
    """run.json per job directory, re-read only when its mtime, size or inode changed.

    Thread-safe; a `stat` per job per refresh is all an unchanged job costs. Directories on this
    machine only (`RunLocation.local`): a remote job's run.json comes from its reader."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[Path, tuple[tuple[int, int, int] | None, AgentRecord | None]] = {}
        self._paths: dict[Path, str] = {}  # job dir -> its run.json, joined once

    def get(self, job_dir: Path) -> AgentRecord | None:
        path = self._paths.get(job_dir)
        if path is None:
            path = self._paths[job_dir] = os.path.join(job_dir, names.RUN_JSON)
        try:
            st = os.stat(path)
            key: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            key = None
        with self._lock:
            cached = self._cache.get(job_dir)
        if cached is not None and cached[0] == key:
            return cached[1]
        record = None if key is None else read_agent_record(job_dir)
        with self._lock:
            self._cache[job_dir] = (key, record)
        return record

    def held(self) -> set[Path]:
        """The job directories whose run.json it remembers."""
        with self._lock:
            return set(self._cache)

    def forget(self, keep: set[Path]) -> None:
        """Drop the entries of jobs that no longer exist (bounded memory)."""
        with self._lock:
            for path in [p for p in self._cache if p not in keep]:
                del self._cache[path]
                self._paths.pop(path, None)


def due_checks(
    jobs: list[str], cursor: int, always: set[str], live: set[str]
) -> tuple[set[str], int]:
    """The jobs whose run.json a refresh looks at, and the cursor for the next: `always` (jobs
    that have one, or changed), the live ones while they are few (a sweep just written has
    10,000: a stat of each every second was most of its idle CPU), and a rotating share of
    the rest (AGENT_CHECK_SHARE, at least AGENT_CHECK_MIN)."""
    share = min(len(jobs), max(AGENT_CHECK_MIN, len(jobs) // AGENT_CHECK_SHARE))
    start = cursor % len(jobs) if jobs else 0
    due = set(jobs[start : start + share]) | set(jobs[: max(0, start + share - len(jobs))])
    live = live if len(live) <= AGENT_CHECK_MIN else set()
    return due | always | live, start + share
