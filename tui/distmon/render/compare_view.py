"""The runs table's comparison view: pure functions from jobs and the view's state to what the
table shows (which rows, in which order, under which group headers, with which columns), and
which jobs the charts overlay. The rows themselves come from distcore.table.

Incremental: `ViewRows` keeps each job's rows and cells and builds them again only for a job
whose version or status changed, so a refresh of 10,000 jobs costs a look-up for each
unchanged one and the work of the changed ones.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from distcore import names
from distcore.errors import DistmonError
from distcore.jobs.snapshots import Job
from distcore.table import (
    CompareRow,
    ComparisonTable,
    Condition,
    build_table,
    compare_row,
    group_rows,
    parse_filter,
    resolve_columns,
    select_rows,
    sort_rows,
    top_rows,
)
from distcore.table.rows import BEST_SUFFIXES
from distcore.tags import Kind, pick_tag
from distcore.textsafe import shown_names, terminal_text
from distmon.formats import column_value
from distmon.render.view_model import NAME_LIMIT, JobRow, filter_jobs, fmt, job_row

OVERLAY_STEPS = (0, 3, 5, 10)  # `o` cycles through these: off, then the top 3, 5, 10
CELL_LIMIT = 16  # characters of a comparison cell
READING = "reading…"  # the header's note until the first read is done
GROUP_KEY = "\x00group\x00"  # row keys of group headers: no job's name starts with NUL


@dataclass(frozen=True)
class TableView:
    """What the user chose: sort column and direction, filter expression, group, overlay,
    and the comparison columns shown (None: the defaults, every hparam and each tag's last)."""

    sort: str | None = None
    reverse: bool = False
    expr: str = ""
    group: str | None = None
    overlay: int = 0
    columns: frozenset[str] | None = None

    def next_overlay(self) -> TableView:
        at = OVERLAY_STEPS.index(self.overlay) if self.overlay in OVERLAY_STEPS else 0
        return dataclasses.replace(self, overlay=OVERLAY_STEPS[(at + 1) % len(OVERLAY_STEPS)])


@dataclass(frozen=True)
class Entry:
    """One job's rows, built once per change of the job; its table row (formatted figures,
    for the screen only) when first read, which the virtual table does for the rows in view."""

    job: Job
    name: str  # the job's shown name, told apart from any that would print alike
    compare: CompareRow

    @functools.cached_property
    def row(self) -> JobRow:
        return job_row(self.job, self.name)


@dataclass(frozen=True)
class Header:
    key: str
    label: str


@dataclass(frozen=True)
class Arranged:
    items: tuple[Entry | Header, ...]  # in table order
    columns: tuple[str, ...]  # the comparison columns shown, after the fixed ones
    choices: tuple[str, ...]  # every comparison column there is (for the column chooser)
    hparams: tuple[str, ...]  # the hparam columns (to group by)
    top: tuple[str, ...]  # the jobs overlaid on the charts (empty: overlay off)
    error: str | None  # the filter expression's error, one line


class ViewRows:
    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._names_key: tuple[str, ...] = ()
        self._names: dict[str, str] = {}
        self._plain: dict[str, bool] = {}  # name -> shown as it is (see distinct_names)
        self._last: tuple[Entry, ...] = ()
        self._jobs_seen: tuple[Job, ...] | None = None
        self._arranged: tuple[tuple[tuple[Entry, ...], str, TableView], Arranged] | None = None

    def entries(self, jobs: Iterable[Job]) -> tuple[Entry, ...]:
        """Each job's entry; the same tuple as last time when no job changed (an unchanged job
        keeps its entry, and the Job it was built from: same version, same parts)."""
        jobs = tuple(jobs)
        if jobs is self._jobs_seen:  # the index hands out the same tuple while nothing changed
            return self._last
        self._jobs_seen = jobs
        fresh: dict[str, Entry] = {}
        changed = False
        names = self._shown_names(jobs)
        for job in jobs:
            entry = self._entries.get(job.name)
            if (
                entry is None
                or (entry.job.version, entry.job.status) != (job.version, job.status)
                or entry.name != names[job.name]
            ):
                entry = Entry(job, names[job.name], compare_row(job))
                changed = True
            fresh[job.name] = entry
        if changed or len(fresh) != len(self._entries):
            self._last = tuple(fresh.values())
        self._entries = fresh
        return self._last

    def _shown_names(self, jobs: tuple[Job, ...]) -> dict[str, str]:
        """Names that would print alike told apart (" #2", textsafe's one rule), worked out
        again only when the set of names changed."""
        key = tuple(j.name for j in jobs)
        if key != self._names_key:
            self._names_key, self._names = key, distinct_names(key, self._plain)
        return self._names

    def arrange(self, jobs: Iterable[Job], pattern: str, view: TableView) -> Arranged:
        """`arrange` over the jobs whose names match `pattern`; the same Arranged as last time
        when neither the jobs nor the view changed (a refresh of an idle sweep costs O(jobs)
        look-ups and nothing else)."""
        entries = self.entries(jobs)
        if self._arranged is not None:
            (last_entries, last_pattern, last_view), last = self._arranged
            if last_entries is entries and (last_pattern, last_view) == (pattern, view):
                return last
        named = entries
        if pattern:
            kept = {j.name for j in filter_jobs([e.job for e in entries], pattern)}
            named = tuple(e for e in entries if e.job.name in kept)
        arranged = arrange(named, view)
        self._arranged = ((entries, pattern, view), arranged)
        return arranged


def distinct_names(names: Sequence[str], plain: dict[str, bool]) -> dict[str, str]:
    """`shown_names(names, NAME_LIMIT)`, without its sort and escaping of every name while a
    sweep's first read adds jobs each draw: names that show as they are (nothing escaped,
    nothing elided: `plain` remembers which) cannot print alike, so each shows as itself.
    Any other name: shown_names, the one rule, over them all."""
    if len(plain) > 2 * len(names) + 1000:  # jobs gone long since: forget them
        plain.clear()
    for name in names:
        shown = plain.get(name)
        if shown is None:
            shown = plain[name] = terminal_text(name, NAME_LIMIT) == name == terminal_text(name)
        if not shown:
            return shown_names(names, NAME_LIMIT)
    return {name: name for name in names}


def default_columns(hparams: Sequence[str], metrics: Sequence[str]) -> tuple[str, ...]:
    return (*hparams, *(m for m in metrics if not m.endswith(BEST_SUFFIXES)))


def shown_columns(
    choices: Sequence[str], defaults: Sequence[str], view: TableView
) -> tuple[str, ...]:
    chosen = set(defaults) if view.columns is None else set(view.columns)
    if view.sort is not None:
        chosen.add(view.sort)  # the sort column always shows
    if view.group is not None:
        chosen.add(view.group)
    return tuple(c for c in choices if c in chosen)


def _conditions(expr: str, table: ComparisonTable) -> tuple[tuple[Condition, ...], str | None]:
    """The expression's conditions on the table's columns (the runs table's headers read as
    the columns they show); none and the one-line error where it is malformed or names a column
    no job has."""
    try:
        conditions = parse_filter(expr)
        if conditions and table.rows:
            conditions = resolve_columns(conditions, table.columns, header_aliases(table.rows))
    except DistmonError as err:
        return (), str(err)
    return conditions, None


def header_aliases(rows: Sequence[CompareRow]) -> dict[str, str]:
    """The runs table's headers that name one column of the comparison table: `wait`, `mfu`
    and `ex/s` their perf/ tags; `loss` and `acc` the tag that the header shows for every job
    (`pick_tag`'s choice), where it is the same tag for all (else which would it be?)."""
    aliases = {"wait": names.INPUT_WAIT_FRACTION, "mfu": names.MFU,
               "ex/s": names.EXAMPLES_PER_SECOND}
    kinds: tuple[tuple[str, Kind], ...] = (("loss", "loss"), ("acc", "accuracy"))
    for header, kind in kinds:
        picked = {pick_tag(_own_tags(row), kind) for row in rows} - {None}
        if len(picked) == 1:
            aliases[header] = str(picked.pop())
    return aliases


def _own_tags(row: CompareRow) -> list[str]:
    """The tags of a row's own training part (no best-value or validation columns)."""
    validation = f"{names.VALIDATION_DIR}/"
    return [c for c in row.metrics
            if not c.endswith(BEST_SUFFIXES) and not c.startswith(validation)]


def arrange(entries: Sequence[Entry], view: TableView) -> Arranged:
    """Filter, sort, group and pick the overlay of `entries` (already name-filtered)."""
    by_name = {e.compare.name: e for e in entries}
    table = build_table(e.compare for e in entries)
    conditions, error = _conditions(view.expr, table)
    rows = select_rows(table.rows, conditions) if conditions else list(table.rows)
    if view.sort is not None:
        rows = sort_rows(rows, view.sort, view.reverse)
    top: list[CompareRow] = []
    if view.overlay:
        top = (
            top_rows(rows, view.sort, view.overlay, view.reverse)
            if view.sort
            else rows[: view.overlay]
        )
    items: list[Entry | Header] = []
    if view.group is None:
        items = [by_name[r.name] for r in rows]
    else:
        for number, (value, members) in enumerate(group_rows(rows, view.group)):
            shown = (
                "–" if value is None else fmt(value, 6) if isinstance(value, float) else str(value)
            )
            # The value first: the name column may be narrow, and the column is in the title.
            label = f"▾ {terminal_text(shown, 40)} ({len(members)})"
            items.append(Header(f"{GROUP_KEY}{number}", label))
            items += [by_name[r.name] for r in members]
    choices = tuple((*table.hparams, *table.metrics))
    columns = shown_columns(choices, default_columns(table.hparams, table.metrics), view)
    top_names = tuple(r.name for r in top)
    return Arranged(tuple(items), columns, choices, table.hparams, top_names, error)


def cell_text(value: object, column: str = "") -> str:
    """A comparison cell as the table shows it: a share as a share (`column_value`), other
    numbers in 4 significant digits."""
    if value is None:
        return "–"
    if isinstance(value, int | float) and not isinstance(value, bool):
        shown = column_value(column, float(value))
        if shown is not None:
            return shown
    if isinstance(value, float):
        return fmt(value, 4)
    return terminal_text(value, CELL_LIMIT)


def view_note(view: TableView, error: str | None) -> str:
    """The view's part of the runs panel's title: sort, expression, group, overlay."""
    parts = []
    if view.sort is not None:
        parts.append(f"sort {'-' if view.reverse else ''}{terminal_text(view.sort, 30)}")
    if view.expr:
        parts.append("where ⚠ bad expression" if error else f"where {terminal_text(view.expr, 40)}")
    if view.group is not None:
        parts.append(f"by {terminal_text(view.group, 30)}")
    if view.overlay:
        parts.append(f"top {view.overlay} on chart")
    return " · ".join(parts)


def reading_note(progress: tuple[int, int] | None) -> str:
    """The header's note while the first read is under way: how far it is, when known."""
    if progress is None or progress[1] <= 0:
        return READING
    done, total = progress
    return f"reading {min(done, total):,}/{total:,} runs…"
