"""The Textual dashboard: jobs, charts, GPUs and alerts on one screen.

It only composes. The producers and their job index run off the UI thread (`ProducerSet`
builds, starts and closes them); the index posts each new `JobsSnapshot`. What the user chose
to see is one frozen `ViewState` (distmon.view) in one reactive: every key replaces it by a pure
transition, and a new snapshot or a new view hands both to the `Board`, whose panels each skip
a draw that did not change. The first screen appears before the first scan ends: runs fill in
as the scan reads them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.reactive import var
from textual.widgets import HelpPanel
from textual.worker import Worker, WorkerState

from distcore.jobs.snapshots import JobsSnapshot
from distcore.safefile import write_atomic
from distcore.textsafe import terminal_text
from distmon import view as views
from distmon.board import Board
from distmon.commands import Choice, DashboardCommands, choices, palette
from distmon.dashboard import DashboardScreen
from distmon.filter_keys import FilterKeys
from distmon.messages import JobsUpdated, ScanFinished
from distmon.options import Options
from distmon.pace import Pacer
from distmon.producers import Producers, ProducerSet, make_producers
from distmon.render.compare_view import READING, Arranged, TableView
from distmon.render.curve import X_MODES
from distmon.render.view_model import all_tags
from distmon.table_keys import TABLE_BINDINGS, TableKeys
from distmon.view import ViewState
from distmon.widgets.runs import RunsTable

if TYPE_CHECKING:  # numpy, NVML: loaded off the UI thread, after the first screen
    from distcore.jobs.index import JobIndex

DEFAULT_TAGS = "loss and accuracy"  # the second chart's default pair, first among the tags


class DistmonApp(FilterKeys, TableKeys, App[int]):
    CSS_PATH = "distmon.tcss"
    TITLE = "distmon"
    COMMANDS = App.COMMANDS | {DashboardCommands}
    # Each key's tooltip is its line in the key panel (`?`), the short description the footer's.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),  # listed with Textual's ctrl+q and its words
        Binding("question_mark", "help", "help", tooltip="show or hide this panel"),
        Binding("slash", "filter", "filter",
                tooltip="filter jobs by regular expression (enter keeps it, escape clears it)"),
        Binding("t", "pick_tag", "tag",
                tooltip="the second chart's tag (any scalar or histogram)"),
        Binding("x", "x_mode", "x axis", tooltip="x axis: step, relative time, wall time"),
        Binding("l", "log_scale", "log", tooltip="log scale on the y axis"),
        Binding("plus,equals_sign", "smoothing(1)", "smooth+", show=False,
                tooltip="more smoothing (TensorBoard's debiased EMA)"),
        Binding("minus", "smoothing(-1)", "smooth-", show=False, tooltip="less smoothing"),
        Binding("r", "reload", "reload", tooltip="read every logdir again"),
        Binding("v", "grid", "grid", show=False, tooltip="a chart per scalar tag, paged"),
        Binding("escape", "escape", "unfocus", show=False,
                tooltip="unfocus the job, clear the filter, close this panel"),
        *TABLE_BINDINGS,
    ]
    state: var[ViewState] = var(ViewState(), init=False)  # what the user chose to see

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
        # Starts and closes them with their index; owns the race of a quit during the start.
        # Set once the first rows are drawn: the watcher's first read waits for it (a bound)
        # before its other threads take the GIL the draw needs.
        self._first_drawn = threading.Event()
        factory = producers or (lambda: make_producers(options, first_drawn=self._first_drawn))
        self.producers = ProducerSet(factory, options, clock=clock)
        self.jobs: JobsSnapshot | None = None  # the snapshot on screen
        self.board = Board([str(p) for p in options.logdirs], self.producers.read_progress)
        self._arranged: Arranged | None = None  # the table as drawn (distmon.table_keys reads it)
        self.set_reactive(DistmonApp.state, views.initial_view(options.sort, options.filter))
        # Snapshot redraws paced by their cost (a 10,000-job redraw holds the GIL the readers
        # need); key presses redraw at once.
        self._pacer = Pacer(self, self._draw_snapshot)
        self.dashboard = DashboardScreen(self.view.expr)

    @property
    def view(self) -> TableView:
        """The comparison table's part of the view (distmon.table_keys replaces it)."""
        return self.state.table

    @view.setter
    def view(self, table: TableView) -> None:
        self.state = views.with_table(self.state, table)

    @property
    def index(self) -> JobIndex | None:
        """The job index whose snapshots the app renders, once built."""
        return self.producers.built_index()

    # --- layout and life ----------------------------------------------------------------------

    def get_default_screen(self) -> DashboardScreen:
        return self.dashboard

    @property
    def _shown(self) -> bool:
        """The board is there to draw on (not before its screen, not while shutting down)."""
        return self.dashboard.is_attached and self.is_running

    def on_mount(self) -> None:
        self.render_jobs()  # the empty frame, drawn while the producers load
        self._start_producers()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A producer that failed to build or start: said on the status line, not lost."""
        if event.state is WorkerState.ERROR and event.worker.group == "producers":
            error = event.worker.error
            text = terminal_text(f"{type(error).__name__}: {error}", 200)
            self.state = views.with_note(self.state, f"producers failed: {text}")

    @work(thread=True, exclusive=True, exit_on_error=False, group="producers")
    def _start_producers(self) -> None:
        """Off the UI thread: build, start, scan; each snapshot posted to the UI (coalesced)."""
        self.producers.launch(self._snapshot_made, self._scanned)

    @work(thread=True, exclusive=True, exit_on_error=False, group="producers")
    def _rescan(self) -> None:
        self.producers.timed_scan(self._scanned)

    def _snapshot_made(self, jobs: JobsSnapshot) -> None:  # on the index's thread
        self.post_message(JobsUpdated(jobs))

    def _scanned(self, seconds: float, error: str | None) -> None:
        self.post_message(ScanFinished(seconds, error))  # the status line shows a failure

    def on_unmount(self) -> None:
        self._first_drawn.set()  # a first read waiting for the draw: not any more
        self.producers.close()

    def on_resize(self) -> None:
        # Legends are fitted to the charts' widths: plot again once the new layout is known
        # (the screen's breakpoints set `-wide`).
        self.call_after_refresh(self.render_jobs)

    # --- (snapshot, view) -> the board --------------------------------------------------------

    def on_jobs_updated(self, message: JobsUpdated) -> None:
        self.jobs = message.jobs
        if self.state.note == READING and self.board.visible:  # rows land while the read goes on
            self._pacer.request()
        else:  # the first rows, and every change after the first read: at once
            self._draw_snapshot()

    def _draw_snapshot(self) -> None:
        if self.is_running:  # the index runs until on_unmount: not once the screen is gone
            self.render_jobs()
            if self.jobs is not None and self.jobs.jobs and not self.dashboard.footer_mounted:
                self.call_after_refresh(self._first_rows_drawn)

    async def _first_rows_drawn(self) -> None:
        self._first_drawn.set()
        await self.dashboard.mount_footer()

    def on_scan_finished(self, message: ScanFinished) -> None:
        note = f"scan failed: {message.error}" if message.error else ""
        self.state = views.with_note(self.state, note)  # the last rows of the read, not paced
        self.call_after_refresh(self.dashboard.mount_footer)  # a read without rows: now

    def watch_state(self) -> None:
        self.render_jobs()

    def render_jobs(self) -> None:
        if not self._shown:  # a snapshot or a key that came while the app shut down
            return
        with contextlib.suppress(NoMatches):  # shutting down: the widgets are already gone
            self.board.draw(self.dashboard, self.jobs, self.state)
        self._arranged = self.board.arranged

    # --- events from widgets and keys: each makes a new view ----------------------------------

    def on_runs_table_row_highlighted(self, message: RunsTable.RowHighlighted) -> None:
        if self._shown:
            self.state = views.with_cursor(self.state, message.key)

    def on_runs_table_toggle_select(self, message: RunsTable.ToggleSelect) -> None:
        self.state = views.toggle_selected(self.state, message.key)

    def on_runs_table_focus_job(self, message: RunsTable.FocusJob) -> None:
        self.state = views.toggle_focus(self.state, message.key)

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None,
        time_format: str | None = None,
    ) -> str | None:
        """The palette's screenshot: an SVG written where `--screenshot-dir` says, else in the
        current directory (Textual's default, ~/Downloads, seldom exists on a GPU server), and
        a notice saying where, or why not, in one line."""
        directory = Path(path) if path else self.options.screenshot_dir or Path.cwd()
        stamp = time.strftime(time_format or "%Y-%m-%dT%H_%M_%S")
        target = directory / (filename or f"distmon_{stamp}.svg")
        try:
            write_atomic(target, self.export_screenshot().encode("utf-8"), mode=0o644)
        except OSError as err:
            why = terminal_text(err.strerror or err, 200)
            self.notify(f"screenshot not written to {terminal_text(target, 300)}: {why}",
                        severity="error", markup=False)
            return None
        self.notify(f"screenshot written to {terminal_text(target, 300)}", markup=False)
        return str(target)

    def action_help(self) -> None:
        """Textual's key panel, beside the board: every key with its tooltip."""
        if self.dashboard.query(HelpPanel):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def tag_choices(self) -> list[Choice]:
        def pick(tag: str | None) -> None:
            self.state = views.with_second_tag(self.state, tag)

        tags = all_tags(self.board.charted(self.jobs, self.state))
        default = Choice(f"tag: {DEFAULT_TAGS}", lambda: pick(None))
        return choices("tag: ", tags, pick, first=[default])

    def x_axis_choices(self) -> list[Choice]:
        def pick(mode: str) -> None:
            self.state = self.state.replace(x_mode=mode)

        return choices("x axis: ", X_MODES, pick)

    def dashboard_choices(self) -> list[Choice]:
        """ctrl+p's list: every choice of the dashboard."""
        return [*self.tag_choices(), *self.table_choices(), *self.x_axis_choices()]

    def action_pick_tag(self) -> None:
        self.push_screen(palette(self.tag_choices(), "tag for the second chart…"))

    def action_x_mode(self) -> None:
        self.state = views.next_x_mode(self.state)

    def action_log_scale(self) -> None:
        self.state = views.toggle_log(self.state)

    def action_smoothing(self, direction: int) -> None:
        self.state = views.smoothed(self.state, direction)

    def action_grid(self) -> None:
        from distmon.widgets.grid import ChartGridScreen  # not before it is asked for

        charted = lambda: self.board.charted(self.jobs, self.state)  # noqa: E731
        self.push_screen(ChartGridScreen(charted, self.options.refresh))

    def action_reload(self) -> None:
        """Read every logdir again (the watcher's scan), then a fresh snapshot."""
        made = self.producers.made
        if made is not None and made.watcher is not None:
            self.state = views.with_note(self.state, "reloading…")
            self._rescan()
        elif self.index is not None:
            self.index.wake()


def run_app(options: Options) -> int:
    from distmon.crash import run_guarded  # a crash: non-zero exit, traceback in a log file

    return run_guarded(DistmonApp(options))


__all__ = ["DistmonApp", "Producers", "run_app"]
