"""The view model: pure functions from the job index's snapshot to what the panels show.

No I/O here: run.json, hosts and alerts come in the `JobsSnapshot` (distcore.jobs), computed
off the UI thread. Rows are jobs; a job's curves are its parts (train, validation, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distcore import names
from distcore.bounded import perf_value
from distcore.events.snapshots import Column, RunSnapshot, Series
from distcore.jobs.parts import split_run
from distcore.jobs.snapshots import Job
from distcore.smoothing import debiased_ema_array
from distcore.tags import Kind, pick_tag
from distcore.textsafe import shown_names, terminal_text
from distmon.formats import mfu_text, number, share, step_text
from distmon.render.curve import X_MODES, Curve, XMode
from distmon.render.distribution import HISTOGRAM_PREFIX, band_curves, histogram_tags

MARKS = {
    "live": "●", "idle": "○", "gone": "✕", "running": "▶", "finished": "✓",
    "failed": "✖", "diverged": "✖", "stopped": "■", "hung": "✖", "died": "✖", "unreadable": "?",
}  # fmt: skip
NAME_LIMIT = 60  # characters of a job name in the table (elided in the middle)

__all__ = [
    "X_MODES", "Curve", "JobRow", "XMode", "curves", "filter_jobs", "job_row", "job_rows",
    "split_run",
]


def main_run(job: Job) -> RunSnapshot | None:
    """The part whose figures a row shows: train, else the first non-system part."""
    parts = job.parts
    if names.TRAIN_DIR in parts:
        return parts[names.TRAIN_DIR]
    return next((r for p, r in parts.items() if not p.startswith(names.SYSTEM_DIR)), None)


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


fmt = number  # the table's cells (render.compare_view) read figures as the panels do


def _last(run: RunSnapshot | None, tag: str | None) -> float | None:
    series = run.scalars.get(tag) if run is not None and tag else None
    return series.last_value if series else None


def _perf(run: RunSnapshot | None, tag: str) -> float | None:
    """A `perf/` tag's last value within its documented range, else unknown."""
    return perf_value(tag, _last(run, tag))


@dataclass(frozen=True)
class JobRow:
    key: str
    mark: str
    status: str
    name: str  # escaped for the terminal and elided
    step: str
    loss: str
    accuracy: str
    examples_per_second: str
    input_wait: str
    mfu: str = "–"

    def cells(self) -> tuple[str, ...]:
        return (
            self.mark,
            self.name,
            self.step,
            self.loss,
            self.accuracy,
            self.examples_per_second,
            self.input_wait,
            self.mfu,
        )


ROW_COLUMNS = ("", "job", "step", "loss", "acc", "ex/s", "wait", "mfu")


def job_rows(jobs: Sequence[Job]) -> list[JobRow]:
    """The rows of `jobs`; names that would print alike are told apart (" #2")."""
    names = shown_names((j.name for j in jobs), NAME_LIMIT)
    return [job_row(j, names[j.name]) for j in jobs]


def job_row(job: Job, name: str | None = None) -> JobRow:
    """`name`: the job's shown name when made distinct among others (job_rows)."""
    main = main_run(job)
    steps = [s.last_step for s in main.scalars.values()] if main is not None else []
    wait = _perf(main, names.INPUT_WAIT_FRACTION)
    speed = _perf(main, names.EXAMPLES_PER_SECOND)
    tags = main.scalars if main is not None else {}
    return JobRow(
        key=job.name,
        mark=MARKS.get(job.status, "?"),
        status=job.status,
        name=terminal_text(job.name, NAME_LIMIT) if name is None else name,
        step=step_text(max(steps) if steps else None),
        loss=number(_last(main, pick_tag(tags, "loss"))),
        accuracy=number(_last(main, pick_tag(tags, "accuracy")), 3),
        examples_per_second=number(speed, 4),
        input_wait=share(wait),
        mfu=mfu_text(_perf(main, names.MFU)),
    )


def x_values(series: Series, mode: XMode) -> Sequence[float]:
    """The x of each point: the snapshot's own steps or wall times (the store's arrays, shared),
    or, relative, the wall times from the first finite one, computed over the array."""
    if mode == "step":
        return series.steps  # integers: the chart places them as float(step) would
    if mode == "wall":
        return series.wall_times
    import numpy as np

    walls = np.asarray(series.wall_times, dtype=np.float64)
    finite = np.isfinite(walls)
    # From the first finite wall time: one NaN first point must not blank the whole curve.
    start = walls[np.argmax(finite)] if finite.any() else 0.0
    with np.errstate(over="ignore", invalid="ignore"):  # 1e300 - -1e300: inf, as in Python
        return _column(walls - start)


def _column(array: Any) -> Column[float]:
    """A computed array, read-only like the store's, in the Column the chart reads (a view:
    the flag never changes an array someone else holds)."""
    view = array.view()
    view.flags.writeable = False
    return Column(view)


def resolve_tag(run: RunSnapshot, wanted: str) -> str | None:
    """`wanted` is a tag, or 'loss'/'accuracy' meaning the run's own name for it."""
    if wanted in ("loss", "accuracy"):
        kind: Kind = "loss" if wanted == "loss" else "accuracy"
        return pick_tag(run.scalars, kind)
    return wanted if wanted in run.scalars else None


def curves(
    jobs: Sequence[Job], wanted: str, mode: XMode, smoothing: float,
    colors: Mapping[str, int] | None = None,
) -> tuple[Curve, ...]:
    """`wanted` of each job's parts; `colors`: each job's colour (a `ColourBook`'s), else
    the jobs' order."""
    if wanted.startswith(HISTOGRAM_PREFIX):  # a histogram tag: its distribution bands
        return band_curves(jobs, wanted, mode)
    out = []
    labels = shown_names(_label(j.name, p) for j in jobs for p in j.parts)
    for order, job in enumerate(jobs):
        color = order if colors is None else colors.get(job.name, order)
        for part, run in job.parts.items():
            tag = resolve_tag(run, wanted)
            if tag is None or not run.scalars[tag].values:
                continue
            series = run.scalars[tag]
            ys = series.values  # the store's own column, unless smoothed (a computed array)
            if smoothing:
                ys = _column(debiased_ema_array(ys, smoothing))
            label = labels[_label(job.name, part)]
            out.append(Curve(label, x_values(series, mode), ys, color, part == "validation"))
    return tuple(out)


def _label(job: str, part: str) -> str:
    return f"{job}/{part}" if part else job


def all_tags(jobs: Iterable[Job]) -> tuple[str, ...]:
    jobs = tuple(jobs)
    scalars = {t for j in jobs for r in j.parts.values() for t in r.scalars}
    return tuple(sorted(scalars)) + tuple(sorted(histogram_tags(jobs)))


def shown_jobs(
    jobs: Sequence[Job],
    visible: Sequence[Job],
    focused: str | None,
    selected: Iterable[str],
    cursor: str | None,
) -> tuple[Job, ...]:
    """The focused job alone; else the selected ones; else the one under the cursor."""
    by_name = {j.name: j for j in jobs}
    if focused in by_name:
        return (by_name[focused],)
    chosen = [by_name[n] for n in sorted(selected) if n in by_name]
    if chosen:
        return tuple(chosen)
    if cursor is not None and cursor in by_name:
        return (by_name[cursor],)
    return tuple(visible[:1])


def status_line(
    logdirs: Sequence[str],
    shown: int,
    total: int,
    pattern: str,
    selected: int,
    notes: Sequence[str],
) -> str:
    """The top line: where, how many jobs, the filter, the selection, then notes and errors."""
    count = f"{shown}/{total}" if pattern else str(total)
    noun = "job" if not pattern and total == 1 else "jobs"  # "2/5 jobs", "1 job"
    parts = [f"distmon  {terminal_text(', '.join(logdirs), 80)}", f"{count} {noun}"]
    if pattern:
        parts.append(f"filter /{terminal_text(pattern, 40)}/")
    if selected:
        parts.append(f"{selected} selected")
    parts += [terminal_text(n, 120) for n in notes]
    return "  ·  ".join(parts)
