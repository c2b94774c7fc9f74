"""The dashboard's screen drawn from (snapshot, view): the runs table, both charts, the focused
job, GPUs, alerts and the status line.

`Board` keeps the comparison table's rows between refreshes and their arrangement for the
snapshot, filter and table view it was made from, so a key that changes neither (a cursor
move, smoothing) arranges nothing; each panel skips its own unchanged draw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from textual.containers import Horizontal, Vertical
from textual.widgets import Input

from distcore.jobs.snapshots import Job, JobsSnapshot
from distmon import view as views
from distmon.render.braille import ColourBook
from distmon.render.compare_view import (
    READING,
    Arranged,
    Entry,
    TableView,
    ViewRows,
    reading_note,
    view_note,
)
from distmon.view import ViewState
from distmon.widgets.charts import LineChart
from distmon.widgets.panels import AlertsPanel, DetailsPanel, GpusPanel, StatusLine
from distmon.widgets.runs import RunsTable

if TYPE_CHECKING:
    from textual.app import ComposeResult
    from textual.screen import Screen


def board_widgets() -> ComposeResult:
    """The board's widgets, laid out (distmon.tcss places them; `-wide` puts runs and charts
    side by side)."""
    yield StatusLine(id="status")
    with Horizontal(id="top"):
        with Vertical(id="left"):
            yield RunsTable(id="runs")
            yield Input(placeholder="regular expression", id="filter")
            yield Input(placeholder="NAME OP VALUE,... e.g. lr<0.01,optimizer=adam", id="expr")
            yield DetailsPanel(id="details")
        with Horizontal(id="charts"):
            yield LineChart(id="chart-loss")
            yield LineChart(id="chart-second")
    with Horizontal(id="bottom"):
        yield GpusPanel(id="gpus")
        yield AlertsPanel(id="alerts")


class Board:
    def __init__(self, logdirs: Sequence[str],
                 progress: Callable[[], tuple[int, int] | None] = lambda: None) -> None:
        """`progress`: (runs read, runs to read) while the first read lands."""
        self._logdirs = list(logdirs)
        self._progress = progress
        self._rows = ViewRows()
        self.arranged: Arranged | None = None  # the table's rows as last drawn
        self._arranged_from: tuple[object, str, TableView] | None = None
        self._charted: tuple[object, object, tuple[object, ...], tuple[Job, ...]] | None = None
        self.visible: tuple[Job, ...] = ()  # the jobs in the table, in its order
        self._revealed: str | None = None  # the sort column last scrolled into view
        self._table_title: str | None = None
        self._colours = ColourBook()  # each job's colour, on every chart, every refresh

    def arrange(self, snap: JobsSnapshot | None, view: ViewState) -> Arranged:
        # By the jobs, not the snapshot: the index keeps the same tuple while no job changed,
        # and a new snapshot every second (its hosts, its time) arranged 100,000 idle jobs again.
        jobs = snap.jobs if snap is not None else ()
        last = self._arranged_from
        if (self.arranged is not None and last is not None and last[0] is jobs
                and last[1:] == (view.pattern, view.table)):  # fmt: skip
            return self.arranged
        self.arranged = arranged = self._rows.arrange(jobs, view.pattern, view.table)
        self._arranged_from = (jobs, view.pattern, view.table)
        self.visible = tuple(i.job for i in arranged.items if isinstance(i, Entry))
        return arranged

    def charted(self, snap: JobsSnapshot | None, view: ViewState) -> tuple[Job, ...]:
        """The jobs the charts show (distmon.view.charted) as last arranged."""
        jobs = snap.jobs if snap is not None else ()
        top = self.arranged.top if self.arranged is not None else ()
        key = (top, view.focused_job, view.selected, view.cursor_job)
        last = self._charted
        if last is not None and last[0] is jobs and last[1] is self.visible and last[2] == key:
            return last[3]  # the jobs and the view as they were: not looked up among all again
        shown = views.charted(view, jobs, self.visible, top)
        self._charted = (jobs, self.visible, key, shown)
        return shown

    def draw(self, main: Screen[Any], snap: JobsSnapshot | None, view: ViewState) -> None:
        arranged = self.arrange(snap, view)
        table = main.query_one(RunsTable)
        table.show(arranged, view.selected)
        if view.table.sort != self._revealed:
            self._revealed = view.table.sort
            if view.table.sort is not None:
                table.reveal_column(view.table.sort)
        note = view_note(view.table, arranged.error)
        title = f"runs · {note}" if note else "runs"
        if title != self._table_title:  # an assignment redraws the whole table, even the same
            self._table_title = table.border_title = title
        main.set_class(view.focused_job is not None, "-focused")
        shown = self.charted(snap, view)
        colors = self._colours.colors([j.name for j in shown])
        main.query_one("#chart-loss", LineChart).chart(shown, "loss", view, colors)
        main.query_one("#chart-second", LineChart).chart(shown, view.second_tag, view, colors)
        main.query_one(DetailsPanel).show_snapshot(snap, view.focused_job)
        main.query_one(AlertsPanel).show_snapshot(snap)
        main.query_one(GpusPanel).show_snapshot(snap)
        if view.note == READING:  # how far a sweep's first read is
            view = views.with_note(view, reading_note(self._progress()))
        text = views.status_text(view, snap, self._logdirs, len(self.visible), arranged.error)
        main.query_one(StatusLine).show_text(text)
