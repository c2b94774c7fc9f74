"""The Textual dashboard: jobs, charts, GPUs and alerts on one screen.

A composition of panels that render the job index's snapshots (distcore.jobs). The producers
(logdir watcher, run store, telemetry sampler, other hosts) and the index are plain threads,
built off the UI thread; the index posts each new `JobsSnapshot` and the app only renders it,
with pure functions from distmon.widgets.model. The first screen appears before the first scan
ends: runs fill in as the scan reads them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
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
from distmon.messages import JobsUpdated, ScanFinished
from distmon.options import Options
from distmon.producers import Producers, RunSource, Telemetry, Watcher, make_producers
from distmon.widgets.charts import LineChart
from distmon.widgets.hosts import gpus_title, no_history, render_hosts
from distmon.widgets.model import (
    X_MODES,
    JobRow,
    XMode,
    all_tags,
    curves,
    filter_jobs,
    job_rows,
    shown_jobs,
    status_line,
)
from distmon.widgets.panels import Panel, render_alerts, render_details
from distmon.widgets.runs import RunsTable
from distmon.widgets.screens import DEFAULT_TAGS, HelpScreen, TagPicker

if TYPE_CHECKING:  # numpy, NVML: loaded off the UI thread, after the first screen
    from distcore.jobs.index import JobIndex
    from distcore.jobs.model import HostSource, Job, JobsSnapshot

WIDE = 120  # columns from which runs and charts sit side by side


class DistmonApp(App[int]):
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
    ]

    def __init__(
        self,
        options: Options,
        *,
        producers: Callable[[], Producers] | None = None,
        store: RunSource | None = None,
        watcher: Watcher | None = None,
        telemetry: Telemetry | None = None,
        hosts: Sequence[HostSource] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`producers` builds the producers (off the UI thread); tests may instead hand over a
        store, watcher, telemetry and host sources of their own. `clock`: the index's wall clock."""
        super().__init__()
        self.options = options
        if producers is None:
            if store is None:
                producers = lambda: make_producers(options)  # noqa: E731
            else:
                given = Producers(store, watcher, telemetry, tuple(hosts))
                producers = lambda: given  # noqa: E731
        self._factory, self._clock = producers, clock
        self._producers: Producers | None = None
        self.index: JobIndex | None = None
        self._closing = False
        self._closing_lock = threading.Lock()
        self.jobs: JobsSnapshot | None = None  # the snapshot on screen
        self._visible: tuple[Job, ...] = ()
        self._rows: list[JobRow] = []
        self._rows_for: tuple[tuple[Job, ...], str] | None = None  # (jobs, pattern) of _rows
        self._drawn: dict[str, object] = {}  # panel -> what it shows, to skip unchanged draws
        self._scan_note = "reading…"
        self.selected: frozenset[str] = frozenset()
        self.focused_job: str | None = None
        self.cursor_job: str | None = None
        self.pattern = ""
        self.second_tag = "accuracy"
        self.smoothing = DEFAULT_WEIGHT
        self.x_mode: XMode = "step"
        self.log_y = False

    # --- layout and life ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        with Horizontal(id="top"):
            with Vertical(id="left"):
                yield RunsTable(id="runs")
                yield Input(placeholder="regular expression", id="filter")
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
        self.render_jobs()  # the empty frame, drawn while the producers load
        self._start_producers()

    @work(thread=True, exclusive=True, exit_on_error=False, group="producers")
    def _start_producers(self) -> None:
        """Off the UI thread: build the producers and the index, start them, then scan."""
        from distcore.jobs.index import JobIndex

        try:
            made = self._factory()
            index = JobIndex(
                made.store,
                logdirs=[str(p) for p in self.options.logdirs],
                telemetry=made.telemetry,
                hosts=made.hosts,
                producers=[p for p in (made.watcher, *made.extra) if p is not None],
                interval=self.options.refresh,
                clock=self._clock,
            )
            with self._closing_lock:  # never start what on_unmount would not close
                if self._closing:
                    return
                self._producers, self.index = made, index
                index.subscribe(self._on_index_snapshot)
                for producer in (made.telemetry, *made.hosts, *made.extra):
                    if producer is not None:
                        producer.start()
                index.start()
        except Exception as err:  # shown in the status line: the dashboard stays up
            self.post_message(ScanFinished(0.0, f"{type(err).__name__}: {err}"))
            return
        self._scan_body(made.watcher, start_watching=True)  # the index's first tick is at once

    def _on_index_snapshot(self, jobs: JobsSnapshot) -> None:
        """On the index's thread: hand the snapshot to the UI thread (coalesced)."""
        self.post_message(JobsUpdated(jobs))

    def _scan_body(self, watcher: Watcher | None, start_watching: bool) -> None:
        began = time.monotonic()
        try:
            if watcher is not None:
                watcher.scan_once()
                with self._closing_lock:  # never start a watcher that on_unmount already closed
                    if start_watching and not self._closing:
                        watcher.start()
        except Exception as err:  # shown in the status line: the dashboard stays up
            self.post_message(ScanFinished(time.monotonic() - began, f"{err}"))
            return
        if watcher is not None and self.index is not None:  # what the scan read, shown soon
            self.index.wake()
        self.post_message(ScanFinished(time.monotonic() - began))

    @work(thread=True, exclusive=True, exit_on_error=False, group="producers")
    def _rescan(self) -> None:
        watcher = self._producers.watcher if self._producers is not None else None
        self._scan_body(watcher, start_watching=False)

    def on_unmount(self) -> None:
        with self._closing_lock:
            self._closing = True
        made = self._producers
        if self.index is not None:
            self.index.close()
        if made is None:
            return
        for producer in (made.watcher, made.telemetry, *made.hosts, *made.extra):
            if producer is not None:
                producer.close()

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
        self.render_jobs()

    def on_scan_finished(self, message: ScanFinished) -> None:
        self._scan_note = f"scan failed: {message.error}" if message.error else ""
        self._show_status()

    def render_jobs(self) -> None:
        """Every panel from the snapshot on screen and the view's state; each skips its draw
        when what it shows did not change."""
        jobs = self.jobs.jobs if self.jobs is not None else ()
        # The index hands out the same jobs tuple while no job changed: rows of 10,000 jobs
        # cost ~0.4 s, so they are made again only when the jobs or the filter changed.
        done = self._rows_for
        if done is None or done[0] is not jobs or done[1] != self.pattern:
            self._visible = filter_jobs(jobs, self.pattern)
            self._rows, self._rows_for = job_rows(self._visible), (jobs, self.pattern)
        self._main.query_one(RunsTable).show(self._rows, self.selected)
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
        hosts, now = self.jobs.hosts, self.jobs.generated_at
        telemetry = self._producers.telemetry if self._producers is not None else None
        history = telemetry.history if telemetry is not None else no_history
        panel = self._main.query_one("#gpus", Panel)
        panel.show(lambda width: render_hosts(hosts, history, now, width))
        panel.border_title = gpus_title(hosts)

    def _show_status(self) -> None:
        total = len(self.jobs.jobs) if self.jobs is not None else 0
        errors = self.jobs.errors if self.jobs is not None else ()
        notes = [self._scan_note] if self._scan_note else []
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
        if key != self.cursor_job:
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
        self.pattern = event.value
        self.render_jobs()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._close_filter()

    # --- actions --------------------------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_filter(self) -> None:
        box = self._main.query_one("#filter", Input)
        box.display = True
        box.focus()

    def _close_filter(self) -> None:
        box = self._main.query_one("#filter", Input)
        box.display = bool(self.pattern)
        self._main.query_one(RunsTable).focus()

    def action_escape(self) -> None:
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
        if self._producers is not None and self._producers.watcher is not None:
            self._scan_note = "reloading…"
            self._show_status()
            self._rescan()
        elif self.index is not None:
            self.index.wake()


def run_app(options: Options) -> int:
    from distmon.crash import run_guarded  # a crash: non-zero exit, traceback in a log file

    return run_guarded(DistmonApp(options, producers=lambda: make_producers(options)))


__all__ = ["DistmonApp", "Producers", "run_app"]
