"""A job's comparison row: status, step, hparams and metric columns, from its parts and run.json.

Columns, in order: `job`, `status`, `step`, then the hparams (sorted by name), then for each
scalar tag its last value `TAG` and its best values `TAG.min`, `TAG.max`. Where the hparams come
from: the hparams plugin's session (TensorBoard's `hp.hparams`, Keras' hparams callback,
tensorboardX's `add_hparams` sub-run, which distcore.jobs.parts makes a part of its job) in any
training part, and distagent's plan and config from run.json (AgentRecord.hparams). A
`validation` part's tags are prefixed `validation/`; system parts (GPU samples) are left out.

`goodput` (the job's ledger's compute over its wall time, where run.json or its `time/` tags
say) sits among the metrics; the `time/` tags themselves are not columns.

Names never clash silently: an hparam named like a fixed column is `hp.NAME`, a tag named like
an hparam shows its last value as `TAG.last`. Values are numbers (int or float, NaN kept) or
strings (booleans as "true"/"false"); an unknown value is a missing key, never a fake zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from distcore import names
from distcore.jobs.ledger import TIME_PREFIX, job_goodput
from distcore.jobs.parts import is_system_part
from distcore.jobs.snapshots import Job

Value = int | float | str
FIXED_COLUMNS: Final = ("job", "status", "step")
BEST_SUFFIXES: Final = (".min", ".max")
_PREFIXED_PARTS: Final = (names.VALIDATION_DIR,)
GOODPUT: Final = names.GOODPUT
"""The ledger's compute over the job's wall time (distcore.jobs.ledger), where it is known."""


@dataclass(frozen=True)
class CompareRow:
    name: str
    status: str
    step: int | None
    hparams: Mapping[str, Value]
    metrics: Mapping[str, Value]  # TAG, TAG.min, TAG.max (or TAG.last on a clash)
    version: int = 0  # the job's version: an unchanged (version, status) is an unchanged row

    def get(self, column: str) -> Value | None:
        """The cell of `column`; None when this job has no such value."""
        if column == "job":
            return self.name
        if column == "status":
            return self.status
        if column == "step":
            return self.step
        value = self.hparams.get(column)
        return value if value is not None else self.metrics.get(column)


@dataclass(frozen=True)
class ComparisonTable:
    hparams: tuple[str, ...]
    metrics: tuple[str, ...]
    rows: tuple[CompareRow, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return (*FIXED_COLUMNS, *self.hparams, *self.metrics)


def _cell(value: Any) -> Value | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return value
    return None  # null, struct, list: TensorBoard shows nothing either


def job_hparams(job: Job) -> dict[str, Value]:
    """run.json's plan and config, then every training part's hparams session, by name."""
    found: dict[str, Value] = {}
    sources: list[Mapping[str, Any]] = [job.agent.hparams] if job.agent is not None else []
    sources += [run.hparams for part, run in job.parts.items() if not is_system_part(part)]
    for source in sources:
        for name, raw in source.items():
            value = _cell(raw)
            if value is not None:
                found[f"hp.{name}" if name in FIXED_COLUMNS else name] = value
    return found


def job_metrics(job: Job, hparams: Mapping[str, Value]) -> dict[str, Value]:
    found: dict[str, Value] = {}
    seen: set[str] = set()
    for part, run in job.parts.items():
        if is_system_part(part):
            continue
        prefix = f"{part}/" if part in _PREFIXED_PARTS else ""
        for tag, series in run.scalars.items():
            if tag.startswith(TIME_PREFIX):  # the ledger's running sums: the goodput column
                continue
            column = prefix + tag
            if column in seen:  # the same tag in two parts: the first part (sorted) wins
                continue
            seen.add(column)
            last = f"{column}.last" if column in hparams or column in FIXED_COLUMNS else column
            found[last] = series.last_value
            found[column + ".min"] = series.min
            found[column + ".max"] = series.max
    goodput = job_goodput(job)
    if goodput is not None:
        found.setdefault(GOODPUT, goodput)  # a tag of that name keeps it
    return found


def job_step(job: Job) -> int | None:
    steps = [
        s.last_step
        for part, run in job.parts.items()
        if not is_system_part(part)
        for s in run.scalars.values()
    ]
    if steps:
        return max(steps)
    return job.agent.last_step if job.agent is not None else None


def compare_row(job: Job) -> CompareRow:
    hparams = job_hparams(job)
    return CompareRow(
        name=job.name,
        status=job.status,
        step=job_step(job),
        hparams=MappingProxyType(hparams),
        metrics=MappingProxyType(job_metrics(job, hparams)),
        version=job.version,
    )


def _metric_order(column: str) -> tuple[str, int]:
    """TAG, TAG.min, TAG.max (and TAG.last) side by side, tags sorted."""
    for rank, suffix in enumerate((".last", *BEST_SUFFIXES), start=1):
        if column.endswith(suffix):
            return (column[: -len(suffix)], rank)
    return (column, 0)


def build_table(rows: Iterable[CompareRow]) -> ComparisonTable:
    rows = tuple(rows)
    hparams = {name for row in rows for name in row.hparams}
    metrics = {name for row in rows for name in row.metrics} - hparams
    return ComparisonTable(
        hparams=tuple(sorted(hparams)),
        metrics=tuple(sorted(metrics, key=_metric_order)),
        rows=rows,
    )
