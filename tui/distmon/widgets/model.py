"""The view model: pure functions from run snapshots to what the panels show.

Keras' TensorBoard callback writes a job as `<job>/train` and `<job>/validation`, and distagent
adds `<job>/system` (GPU samples) and `<job>/run.json`: a row is a job, its curves are its parts.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from distcore import names
from distcore.smoothing import debiased_ema
from distcore.tags import Kind, pick_tag

if TYPE_CHECKING:  # the reader's package imports numpy: not before the first screen
    from distcore.events.model import RunSnapshot, Series

XMode = Literal["step", "relative", "wall"]
X_MODES: tuple[XMode, ...] = ("step", "relative", "wall")
PARTS = (names.TRAIN_DIR, names.VALIDATION_DIR)
STATUS_RANK = {"live": 0, "idle": 1, "gone": 2}
MARKS = {"live": "●", "idle": "○", "gone": "✕"}


@dataclass(frozen=True)
class Job:
    """One row: a job and its runs keyed by part ("train", "validation", or "" for a lone run)."""

    name: str
    runs: Mapping[str, RunSnapshot]
    status: str

    @property
    def main(self) -> RunSnapshot:
        return self.runs.get(names.TRAIN_DIR) or next(iter(self.runs.values()))

    @property
    def job_dir(self) -> Path:
        return job_dir_of(self.main)


def split_run(name: str) -> tuple[str, str]:
    """('job', 'train') for 'job/train'; (name, '') for a run that is not a Keras part."""
    head, _, tail = name.rpartition("/")
    if tail in PARTS:
        return (head or ".", tail)
    return (name, "")


def is_system_run(name: str) -> bool:
    parts = name.split("/")
    return names.SYSTEM_DIR in parts[-2:]


def job_dir_of(run: RunSnapshot) -> Path:
    """Where a distagent job's run.json would be: above train/, validation/, system/ and
    system/worker-<i>/; a lone run's own folder otherwise."""
    if is_system_run(run.name):
        return run.path.parent if run.path.name == names.SYSTEM_DIR else run.path.parent.parent
    return run.path.parent if split_run(run.name)[1] else run.path


def group_jobs(runs: Iterable[RunSnapshot]) -> tuple[Job, ...]:
    grouped: dict[str, dict[str, RunSnapshot]] = {}
    for run in runs:
        if is_system_run(run.name):
            continue
        job, part = split_run(run.name)
        grouped.setdefault(job, {})[part] = run
    jobs = []
    for name in sorted(grouped):
        parts = grouped[name]
        status = min((r.status for r in parts.values()), key=lambda s: STATUS_RANK.get(s, 3))
        jobs.append(Job(name, dict(sorted(parts.items())), status))
    return tuple(jobs)


def compile_filter(pattern: str) -> re.Pattern[str] | None:
    """A regular expression (case-insensitive); None when it does not compile."""
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error:
        return None


def filter_jobs(jobs: Sequence[Job], pattern: str) -> tuple[Job, ...]:
    if not pattern:
        return tuple(jobs)
    regex = compile_filter(pattern)
    if regex is None:  # half-typed expression: match it literally meanwhile
        regex = re.compile(re.escape(pattern), re.IGNORECASE)
    return tuple(j for j in jobs if regex.search(j.name))


def fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "–"
    if math.isnan(value) or math.isinf(value):
        return str(value)
    return f"{value:.{digits}g}"


def _last(run: RunSnapshot, tag: str | None) -> float | None:
    series = run.scalars.get(tag) if tag else None
    return series.last_value if series else None


@dataclass(frozen=True)
class JobRow:
    key: str
    mark: str
    status: str
    name: str
    step: str
    loss: str
    accuracy: str
    examples_per_second: str
    input_wait: str

    def cells(self) -> tuple[str, ...]:
        return (
            self.mark,
            self.name,
            self.step,
            self.loss,
            self.accuracy,
            self.examples_per_second,
            self.input_wait,
        )


ROW_COLUMNS = ("", "job", "step", "loss", "acc", "ex/s", "wait")


def job_row(job: Job) -> JobRow:
    main = job.main
    steps = [s.last_step for s in main.scalars.values()]
    wait = _last(main, names.INPUT_WAIT_FRACTION)
    speed = _last(main, names.EXAMPLES_PER_SECOND)
    return JobRow(
        key=job.name,
        mark=MARKS.get(job.status, "?"),
        status=job.status,
        name=job.name,
        step=str(max(steps)) if steps else "–",
        loss=fmt(_last(main, pick_tag(main.scalars, "loss"))),
        accuracy=fmt(_last(main, pick_tag(main.scalars, "accuracy")), 3),
        examples_per_second="–" if speed is None else f"{speed:.0f}",
        input_wait="–" if wait is None else f"{wait:.0%}",
    )


@dataclass(frozen=True)
class Curve:
    """One line on a chart."""

    label: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    color: int  # index into the palette; a job's parts share it, validation is dimmed
    dim: bool = False


def x_values(series: Series, mode: XMode) -> tuple[float, ...]:
    if mode == "step":
        return tuple(float(s) for s in series.steps)
    if mode == "relative":
        # From the first finite wall time: one NaN first point must not blank the whole curve.
        start = next((w for w in series.wall_times if math.isfinite(w)), 0.0)
        return tuple(w - start for w in series.wall_times)
    return tuple(series.wall_times)


def resolve_tag(run: RunSnapshot, wanted: str) -> str | None:
    """`wanted` is a tag, or 'loss'/'accuracy' meaning the run's own name for it."""
    if wanted in ("loss", "accuracy"):
        kind: Kind = "loss" if wanted == "loss" else "accuracy"
        return pick_tag(run.scalars, kind)
    return wanted if wanted in run.scalars else None


def curves(jobs: Sequence[Job], wanted: str, mode: XMode, smoothing: float) -> tuple[Curve, ...]:
    out = []
    for color, job in enumerate(jobs):
        for part, run in job.runs.items():
            tag = resolve_tag(run, wanted)
            if tag is None or not run.scalars[tag].values:
                continue
            series = run.scalars[tag]
            ys = tuple(debiased_ema(series.values, smoothing)) if smoothing else series.values
            label = f"{job.name}/{part}" if part else job.name
            out.append(Curve(label, x_values(series, mode), ys, color, part == "validation"))
    return tuple(out)


def all_tags(jobs: Iterable[Job]) -> tuple[str, ...]:
    return tuple(sorted({t for j in jobs for r in j.runs.values() for t in r.scalars}))


@dataclass(frozen=True)
class Plan:
    """What distagent's run.json says about a job (every field optional)."""

    status: str | None = None
    replicas: int | None = None
    global_batch_size: int | None = None
    learning_rate: str | None = None
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def _provenance(plan: Mapping[str, Any]) -> str | None:
    given = plan.get("learning_rate_provenance") or plan.get("provenance")
    if isinstance(given, str):
        return given
    lr, base = plan.get("learning_rate"), plan.get("base_learning_rate")
    if lr is None:
        return None
    if base is None:
        return f"{lr:g}" if isinstance(lr, float) else str(lr)
    batch = plan.get("per_replica_batch_size")
    replicas = plan.get("replicas")
    rule = plan.get("scaling_rule", "?")
    return f"{base:g} @ batch {batch} × {replicas} replicas ({rule}) = {lr:.4g}"


def read_plan(job_dir: Path) -> Plan | None:
    """The job's run.json, or None when it has none (not written by distagent) or is unreadable."""
    try:
        doc = json.loads((job_dir / names.RUN_JSON).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    nested = doc.get("plan")
    plan: dict[str, Any] = nested if isinstance(nested, dict) else doc
    return Plan(
        status=doc.get("status"),
        replicas=plan.get("replicas"),
        global_batch_size=plan.get("global_batch_size"),
        learning_rate=_provenance(plan),
        error=doc.get("error"),
        extra={k: doc[k] for k in ("host", "pid", "last_step") if k in doc},
    )
