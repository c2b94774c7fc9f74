"""The Textual dashboard: jobs, charts, GPUs and alerts on one screen.

A composition of panels that render the job index's snapshots (distcore.jobs). The producers
(logdir watcher, run store, telemetry sampler, other hosts) and the index are plain threads,
built off the UI thread; the index posts each new `JobsSnapshot` and the app only renders it,
with pure functions from distmon.widgets.model. The first screen appears before the first scan
ends: runs fill in as the scan reads them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from distcore.smoothing import DEFAULT_WEIGHT, WEIGHT_STEP, adjust_weight
from distcore.table import parse_sort
from distmon.messages import JobsUpdated, ScanFinished
from distmon.options import Options
from distmon.pace import Pacer
from distmon.producers import Producers, ProducerSet, make_producers
from distmon.table_keys import TABLE_BINDINGS, TableKeys
from distmon.widgets.charts import LineChart
from distmon.widgets.compare_view import (
    READING,
    Arranged,
    Entry,
    TableView,
    ViewRows,
    reading_note,
    view_note,
)
from distmon.widgets.hosts import gpus_title, render_hosts
from distmon.widgets.model import (
    X_MODES,
    XMode,
    all_tags,
    curves,
    shown_jobs,
    status_line,
)
from distmon.widgets.panels import Panel, render_alerts, render_details
from distmon.widgets.runs import RunsTable
from distmon.widgets.screens import DEFAULT_TAGS, HelpScreen, TagPicker

if TYPE_CHECKING:  # numpy, NVML: loaded off the UI thread, after the first screen
    from distcore.jobs.index import JobIndex
    from distcore.jobs.model import Job, JobsSnapshot

WIDE = 120  # columns from which runs and charts sit side by side


class DistmonApp(TableKeys, App[int]):
    CSS_PATH = "distmon.tcss"
    TITLE = "distmon"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help"),
        Binding("slash", "filter", "filter"),
        Binding("t", "pick_tag", "tag"),
        Binding("x", "x_mode", "x axis"),
        Binding("l", "log_scale", "log"),
        Binding("plus,equals_sign", "smoothing(1)", "smooth+", show=False),
        Binding("minus", "smoothing(-1)", "smooth-", show=False),
        Binding("r", "reload", "reload"),
        Binding("escape", "escape", "unfocus", show=False),
        *TABLE_BINDINGS,
    ]

    def __init__(
        self,
        options: Options,
        *,
        producers: Callable[[], Producers] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`producers` builds the producers, off the UI thread (default: the real ones for
        `options`; tests build their own). `clock`: the index's wall clock."""
        super().__init__()
        self.options = options
        factory = producers or (lambda: make_producers(options))
        # Starts and closes them with their index; owns the race of a quit during the start.
        self.producers = ProducerSet(factory, options, clock=clock)
        self.jobs: JobsSnapshot | None = None  # the snapshot on screen
        self._visible: tuple[Job, ...] = ()
        self._drawn: dict[str, object] = {}  # panel -> what it shows, to skip unchanged draws
        self._scan_note = READING
        self.selected: frozenset[str] = frozenset()
        self.focused_job: str | None = None
        self.cursor_job: str | None = None
        self.pattern = ""
        self.second_tag = "accuracy"
        self.smoothing = DEFAULT_WEIGHT
        self.x_mode: XMode = "step"
        self.log_y = False
        # The comparison table (issue 20): the view's state, and each job's rows kept between
        # refreshes (built again only for the jobs that changed).
        sort, reverse = parse_sort(options.sort) if options.sort else (None, False)
        self.view = TableView(sort=sort, reverse=reverse, expr=options.filter)
        self._view_rows = ViewRows()
        self._arranged: Arranged | None = None
        # Snapshot redraws paced by their cost (a 10,000-job redraw holds the GIL the readers
        # need); key presses redraw at once.
        self._pacer = Pacer(self, self._draw_snapshot)

    # --- layout and life ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        with Horizontal(id="top"):
            with Vertical(id="left"):
                yield RunsTable(id="runs")
                yield Input(placeholder="regular expression", id="filter")
                yield Input(placeholder="NAME OP VALUE,... e.g. lr<0.01,optimizer=adam", id="expr")
                yield Panel(id="details")
            with Horizontal(id="charts"):
                yield LineChart(id="chart-loss")
                yield LineChart(id="chart-second")
        with Horizontal(id="bottom"):
            yield Panel(id="gpus")
            yield Panel(id="alerts")
        yield Footer()

    def on_mount(self) -> None:
        for widget_id, title in (("runs", "runs"), ("gpus", "GPUs"), ("alerts", "alerts")):
            self._main.query_one(f"#{widget_id}").border_title = title
        self._main.query_one("#details").border_title = "focused"
        self._apply_size(self.size.width)
        self._main.query_one(RunsTable).focus()
        expr = self._main.query_one("#expr", Input)
        expr.value, expr.display, expr.disabled = self.view.expr, bool(self.view.expr), True
        self.render_jobs()  # the empty frame, drawn while the producers load
        self._start_producers()

    @property
    def index(self) -> JobIndex | None:
        """The job index whose snapshots the app renders, once built."""
        return self.producers.built_index()

    @work(thread=True, exclusive=True, exit_on_error=False, group="producers")
    def _start_producers(self) -> None:
        """Off the UI thread: build the producers and the index, start them, then scan."""
        try:
            self.producers.build().subscribe(self._on_index_snapshot)
            if not self.producers.start_producers():
                return  # the app is closing: nothing was left running
        except Exception as err:  # shown in the status line: the dashboard stays up
            self.post_message(ScanFinished(0.0, f"{type(err).__name__}: {err}"))
            return
        self._scan_body(start_watching=True)  # the index's first tick is at once

    def _on_index_snapshot(self, jobs: JobsSnapshot) -> None:
        """On the index's thread: hand the snapshot to the UI thread (coalesced)."""
        self.post_message(JobsUpdated(jobs))

    def _scan_body(self, start_watching: bool) -> None:
        began = time.monotonic()
        try:
            self.producers.scan(start_watching=start_watching)
        except Exception as err:  # shown in the status line: the dashboard stays up
            self.post_message(ScanFinished(time.monotonic() - began, f"{err}"))
            return
        self.post_message(ScanFinished(time.monotonic() - began))

    @work(thread=True, exclusive=True, exit_on_error=False, group="producers")
    def _rescan(self) -> None:
        self._scan_body(start_watching=False)

    def on_unmount(self) -> None:
        self.producers.close()

    def on_resize(self) -> None:
        self._apply_size(self.size.width)
        self.call_after_refresh(self._refit_charts)

    def _refit_charts(self) -> None:
        """Legends are fitted to the charts' widths: plot again once the new layout is known."""
        with contextlib.suppress(NoMatches):  # shutting down: the widgets are already gone
            self._show_charts()

    @property
    def _main(self) -> Screen[Any]:
        """The dashboard's screen, also while help or the tag picker is on top of it."""
        return self.screen_stack[0]

    def _apply_size(self, width: int) -> None:
        self._main.set_class(width >= WIDE, "-wide")

    # --- snapshots -> panels ------------------------------------------------------------------

    def on_jobs_updated(self, message: JobsUpdated) -> None:
        self.jobs = message.jobs
        if self._scan_note == READING and self._visible:  # rows land while the read goes on
            self._pacer.request()
        else:  # the first rows, and every change after the first read: at once
            self._draw_snapshot()

    def _draw_snapshot(self) -> None:
        # The index's thread runs until on_unmount: a snapshot posted while the screen is taken
        # down finds its widgets gone.
        if self.is_running:
            with contextlib.suppress(NoMatches):
                self.render_jobs()

    def on_scan_finished(self, message: ScanFinished) -> None:
        self._scan_note = f"scan failed: {message.error}" if message.error else ""
        self._draw_snapshot()  # the last rows of the read, not paced

    def render_jobs(self) -> None:
        """Every panel from the snapshot on screen and the view's state; each skips its draw
        when what it shows did not change."""
        if not self.screen_stack:  # a snapshot that arrived while the app shut down
            return
        jobs = self.jobs.jobs if self.jobs is not None else ()
        self._arranged = arranged = self._view_rows.arrange(jobs, self.pattern, self.view)
        self._visible = tuple(i.job for i in arranged.items if isinstance(i, Entry))
        table = self._main.query_one(RunsTable)
        table.show(arranged, self.selected)
        note = view_note(self.view, arranged.error)
        table.border_title = f"runs · {note}" if note else "runs"
        self._show_charts()
        self._show_details()
        self._show_alerts()
        self._show_gpus()
        self._show_status()

    def _changed(self, panel: str, key: object) -> bool:
        if self._drawn.get(panel) == key:
            return False
        self._drawn[panel] = key
        return True

    def _shown(self) -> tuple[Job, ...]:
        jobs = self.jobs.jobs if self.jobs is not None else ()
        top = self._arranged.top if self._arranged is not None else ()
        if top and self.focused_job is None:  # `o`: the top N by the sort column
            by_name = {j.name: j for j in self._visible}
            return tuple(by_name[name] for name in top if name in by_name)
        return shown_jobs(jobs, self._visible, self.focused_job, self.selected, self.cursor_job)

    def _show_charts(self) -> None:
        shown = self._shown()
        # The width: a chart's legend is fitted to it when plotted (0 before the first layout).
        width = self._main.query_one("#chart-loss", LineChart).size.width
        view = (self.second_tag, self.x_mode, self.smoothing, self.log_y, width)
        if not self._changed("charts", (tuple((j.name, j.version) for j in shown), view)):
            return
        how = f"ema {self.smoothing:g} · {self.x_mode}" + (" · log" if self.log_y else "")
        for widget_id, wanted in (("#chart-loss", "loss"), ("#chart-second", self.second_tag)):
            self._main.query_one(widget_id, LineChart).plot(
                curves(shown, wanted, self.x_mode, self.smoothing),
                title=f"{wanted} ({how})",
                log_y=self.log_y,
                mode=self.x_mode,
            )

    def _show_details(self) -> None:
        panel = self._main.query_one("#details", Panel)
        jobs = self.jobs.jobs if self.jobs is not None else ()
        job = next((j for j in jobs if j.name == self.focused_job), None)
        panel.display = job is not None
        alerts = self.jobs.alerts if self.jobs is not None else ()
        if job is not None and self._changed("details", (job, alerts)):
            panel.update(render_details(job, alerts))

    def _show_alerts(self) -> None:
        alerts = self.jobs.alerts if self.jobs is not None else ()
        errors = self.jobs.errors if self.jobs is not None else ()
        problems = self.jobs.problems if self.jobs is not None else ()
        if not self._changed("alerts", (alerts, errors, problems)):
            return
        panel = self._main.query_one("#alerts", Panel)
        panel.update(render_alerts(alerts, errors, problems))
        count = len(alerts) + len(errors) + len(problems)
        panel.border_title = f"alerts ({count})" if count else "alerts"

    def _show_gpus(self) -> None:
        if self.jobs is None or not self._changed("gpus", self.jobs.hosts):
            return
        hosts, now, kept = self.jobs.hosts, self.jobs.generated_at, self.jobs.local_history
        history = lambda key: kept.get(key, ())  # noqa: E731
        panel = self._main.query_one("#gpus", Panel)
        panel.show(lambda width: render_hosts(hosts, history, now, width))
        panel.border_title = gpus_title(hosts)

    def _show_status(self) -> None:
        total = len(self.jobs.jobs) if self.jobs is not None else 0
        errors = self.jobs.errors if self.jobs is not None else ()
        notes = [self._scan_note] if self._scan_note else []
        if self._scan_note == READING:  # how far the first read is (issue 20)
            made = self.producers.made
            progress = getattr(made.watcher if made else None, "progress", lambda: None)
            notes = [reading_note(progress())]
        if self._arranged is not None and self._arranged.error:
            notes.append(self._arranged.error)
        notes += [f"{e.producer}: {e.message}" for e in errors[:1]]
        logdirs = [str(p) for p in self.options.logdirs]
        text = status_line(
            logdirs, len(self._visible), total, self.pattern, len(self.selected), notes
        )
        if self._changed("status", text):  # an update re-lays the screen out: only on change;
            # Content(str) is plain text: a typed filter or a path is never read as markup.
            self._main.query_one("#status", Static).update(Content(text))

    # --- events from widgets ----------------------------------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if key != self.cursor_job and self.screen_stack:  # (not while shutting down)
            self.cursor_job = key
            self._show_charts()

    def on_runs_table_toggle_select(self, message: RunsTable.ToggleSelect) -> None:
        self.selected = self.selected ^ {message.key}
        self.render_jobs()

    def on_runs_table_focus_job(self, message: RunsTable.FocusJob) -> None:
        self.focused_job = None if self.focused_job == message.key else message.key
        self._main.set_class(self.focused_job is not None, "-focused")
        self.render_jobs()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "expr":
            self.set_view(dataclasses.replace(self.view, expr=event.value))
            return
        self.pattern = event.value
        self.render_jobs()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "expr":
            self.close_expression()
            return
        self._close_filter()

    # --- actions --------------------------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_filter(self) -> None:
        box = self._main.query_one("#filter", Input)
        box.disabled = False
        box.display = True
        box.focus()

    def _close_filter(self) -> None:
        """Back to the list; the kept pattern stays in view but cannot take the focus (Tab
        into it made `q` type instead of quit)."""
        box = self._main.query_one("#filter", Input)
        box.display = bool(self.pattern)
        box.disabled = True
        self._main.query_one(RunsTable).focus()

    def action_escape(self) -> None:
        expr = self._main.query_one("#expr", Input)
        if expr.has_focus:  # escape in the expression box clears the expression only
            expr.value = ""
            self.set_view(dataclasses.replace(self.view, expr=""))
            self.close_expression()
            return
        box = self._main.query_one("#filter", Input)
        if box.has_focus or (self.pattern and self.focused_job is None):
            box.value = ""
            self.pattern = ""
            self._close_filter()
        self.focused_job = None
        self._main.remove_class("-focused")
        self.render_jobs()

    def action_pick_tag(self) -> None:
        def chosen(tag: str | None) -> None:
            if tag is not None:
                self.second_tag = "accuracy" if tag == DEFAULT_TAGS else tag
                self._show_charts()

        self.push_screen(TagPicker(all_tags(self._shown())), chosen)

    def action_x_mode(self) -> None:
        self.x_mode = X_MODES[(X_MODES.index(self.x_mode) + 1) % len(X_MODES)]
        self._show_charts()

    def action_log_scale(self) -> None:
        self.log_y = not self.log_y
        self._show_charts()

    def action_smoothing(self, direction: int) -> None:
        self.smoothing = adjust_weight(self.smoothing, direction * WEIGHT_STEP)
        self._show_charts()

    def action_reload(self) -> None:
        """Read every logdir again (the watcher's scan), then a fresh snapshot."""
        made = self.producers.made
        if made is not None and made.watcher is not None:
            self._scan_note = "reloading…"
            self._show_status()
            self._rescan()
        elif self.index is not None:
            self.index.wake()


def run_app(options: Options) -> int:
    from distmon.crash import run_guarded  # a crash: non-zero exit, traceback in a log file

    return run_guarded(DistmonApp(options, producers=lambda: make_producers(options)))


__all__ = ["DistmonApp", "Producers", "run_app"]
