"""The dashboard's view state: what the user chose to see, as one frozen value.

The app holds one `ViewState` in one reactive; every key produces a new one through a pure
transition here, and the panels render (snapshot, view). Nothing here imports Textual, so the
transitions are tested as tables (tests/tui/test_view.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from distcore.jobs.snapshots import Job, JobsSnapshot
from distcore.smoothing import DEFAULT_WEIGHT, WEIGHT_STEP, adjust_weight
from distcore.table import parse_sort
from distmon.render.compare_view import TableView
from distmon.render.curve import X_MODES, XMode
from distmon.render.view_model import shown_jobs, status_line

DEFAULT_SECOND = "accuracy"  # the second chart's tag: each run's own accuracy tag


@dataclass(frozen=True)
class ViewState:
    """Which jobs are selected, focused and under the cursor; the name filter; the second
    chart's tag, its smoothing, x axis and scale; the comparison table's view; and the note
    the status line carries (a scan under way or failed)."""

    selected: frozenset[str] = frozenset()
    focused_job: str | None = None
    cursor_job: str | None = None
    pattern: str = ""
    second_tag: str = DEFAULT_SECOND
    smoothing: float = DEFAULT_WEIGHT
    x_mode: XMode = "step"
    log_y: bool = False
    table: TableView = field(default_factory=TableView)
    note: str = "reading…"

    def replace(self, **changes: object) -> ViewState:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def initial_view(sort: str | None, expr: str) -> ViewState:
    """The view at start: the table sorted and filtered as the command line asked."""
    column, reverse = parse_sort(sort) if sort else (None, False)
    return ViewState(table=TableView(sort=column, reverse=reverse, expr=expr))


# --- transitions: each key's new view ---------------------------------------------------------


def toggle_selected(view: ViewState, key: str) -> ViewState:
    return view.replace(selected=view.selected ^ {key})


def toggle_focus(view: ViewState, key: str) -> ViewState:
    return view.replace(focused_job=None if view.focused_job == key else key)


def with_cursor(view: ViewState, key: str | None) -> ViewState:
    return view.replace(cursor_job=key)


def with_pattern(view: ViewState, pattern: str) -> ViewState:
    return view.replace(pattern=pattern)


def with_second_tag(view: ViewState, tag: str | None) -> ViewState:
    """`tag` None: back to the default pair (loss and accuracy)."""
    return view.replace(second_tag=DEFAULT_SECOND if tag is None else tag)


def next_x_mode(view: ViewState) -> ViewState:
    return view.replace(x_mode=X_MODES[(X_MODES.index(view.x_mode) + 1) % len(X_MODES)])


def toggle_log(view: ViewState) -> ViewState:
    return view.replace(log_y=not view.log_y)


def smoothed(view: ViewState, direction: int) -> ViewState:
    return view.replace(smoothing=adjust_weight(view.smoothing, direction * WEIGHT_STEP))


def with_table(view: ViewState, table: TableView) -> ViewState:
    return view.replace(table=table)


def with_expression(view: ViewState, expr: str) -> ViewState:
    return view.replace(table=dataclasses.replace(view.table, expr=expr))


def with_note(view: ViewState, note: str) -> ViewState:
    return view.replace(note=note)


def escaped(view: ViewState, filter_focused: bool) -> ViewState:
    """Escape: leaves the focused job; clears the name filter when typing in it, or when it
    is what escape would otherwise leave (no job focused)."""
    clear = filter_focused or (bool(view.pattern) and view.focused_job is None)
    return view.replace(focused_job=None, pattern="" if clear else view.pattern)


# --- what the view shows ----------------------------------------------------------------------


def charted(
    view: ViewState, jobs: Sequence[Job], visible: Sequence[Job], top: Sequence[str]
) -> tuple[Job, ...]:
    """The jobs on the charts: the overlay's top N by the sort column (unless a job is
    focused); else the focused job, the selected ones, or the one under the cursor."""
    if top and view.focused_job is None:
        by_name = {j.name: j for j in visible}
        return tuple(by_name[name] for name in top if name in by_name)
    return shown_jobs(jobs, visible, view.focused_job, view.selected, view.cursor_job)


def chart_title(view: ViewState, tag: str) -> str:
    how = f"ema {view.smoothing:g} · {view.x_mode}" + (" · log" if view.log_y else "")
    return f"{tag} ({how})"


def status_text(
    view: ViewState,
    snap: JobsSnapshot | None,
    logdirs: Sequence[str],
    visible: int,
    table_error: str | None,
) -> str:
    """The top line: where, how many jobs, the filter and selection, then the notes (the
    scan's, a bad table expression, the first producer error)."""
    errors = snap.errors if snap is not None else ()
    notes = [n for n in (view.note, table_error) if n]
    notes += [f"{e.producer}: {e.message}" for e in errors[:1]]
    total = len(snap.jobs) if snap is not None else 0
    return status_line(logdirs, visible, total, view.pattern, len(view.selected), notes)
