"""The dashboard's screen: the board, what the user chose to see, and every key that changes it.

The app's default screen (`App.get_default_screen`); the app only runs the producers and hands
their snapshots and scan results here. What the user chose to see is one frozen `ViewState`
(distmon.view) in one reactive: every key replaces it by a pure transition, and a new snapshot
or a new view hands both to the `Board`, whose panels each skip a draw that did not change. The
first frame (runs still being read) is drawn before the first snapshot. The keys are
distmon.keymaps'; the comparison table's palette lists are distmon.table_choices'.

Textual's horizontal breakpoints set `-wide` from 120 columns (distmon.tcss puts runs and charts
side by side there); the class is also set before the widgets are first styled, as a Resize
only comes after the first frame and a class set then styled the whole board a second time.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.css.query import NoMatches
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Footer, HelpPanel, Input

from distcore.jobs.snapshots import Job, JobsSnapshot
from distmon import keymaps
from distmon import view as views
from distmon.board import Board, board_widgets
from distmon.commands import Choice, DashboardCommands, choices, palette
from distmon.options import Options
from distmon.pace import Pacer
from distmon.render.compare_view import READING, Arranged, TableView
from distmon.render.curve import X_MODES
from distmon.render.view_model import all_tags
from distmon.table_choices import (
    group_choices,
    listed_columns,
    shown_columns,
    sort_choices,
    table_choices,
)
from distmon.view import ViewState
from distmon.widgets.runs import RunsTable
from distmon.widgets.table_screens import ColumnsChooser

WIDE = 120  # columns from which runs and charts sit side by side
TITLES = (("runs", "runs"), ("gpus", "GPUs"), ("alerts", "alerts"), ("details", "focused"))
DEFAULT_TAGS = "loss and accuracy"  # the second chart's default pair, first among the tags


class DashboardScreen(Screen[Any]):
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (WIDE, "-wide")]  # noqa: RUF012 - Textual's
    BINDINGS: ClassVar[list[BindingType]] = keymaps.DASHBOARD
    COMMANDS = {DashboardCommands}  # noqa: RUF012 - Textual's
    state: var[ViewState] = var(ViewState(), init=False)  # what the user chose to see

    def __init__(
        self,
        options: Options,
        *,
        progress: Callable[[], tuple[int, int] | None],
        reload: Callable[[], bool],
        first_rows: Callable[[], None],
    ) -> None:
        """`progress`: (runs read, runs to read) while the first read lands; `reload` reads
        every logdir again (False: there is no watcher to, and a fresh snapshot comes instead);
        `first_rows` is told once the first rows are drawn."""
        super().__init__()
        self.board = Board([str(p) for p in options.logdirs], progress)
        self._reload, self._first_rows = reload, first_rows
        self._refresh_every = options.refresh
        self.jobs: JobsSnapshot | None = None  # the snapshot on screen
        self.set_reactive(DashboardScreen.state, views.initial_view(options.sort, options.filter))
        # Snapshot redraws paced by their cost (a sweep's redraw holds the GIL the readers
        # need); key presses redraw at once.
        self._pacer = Pacer(self, self._draw_snapshot)
        self.footer_mounted = False

    @property
    def view(self) -> TableView:
        """The comparison table's part of the view (distmon.table_choices replaces it)."""
        return self.state.table

    @view.setter
    def view(self, table: TableView) -> None:
        self.state = views.with_table(self.state, table)  # its watcher renders, once

    @property
    def arranged(self) -> Arranged | None:
        """The table's rows as last drawn (the palette's lists are made from it)."""
        return self.board.arranged

    # --- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        self.set_class(self.app.size.width >= WIDE, "-wide")
        self.set_class(self.app.size.width < WIDE, "-narrow")
        titles = dict(TITLES)
        # Titled as made: the panels retitle themselves from each snapshot, which can come
        # before this screen's own Mount.
        for widget in board_widgets():  # the footer follows the first rows (mount_footer)
            if widget.id in titles:
                widget.border_title = titles[widget.id]
            yield widget

    def on_mount(self) -> None:
        self.query_one(RunsTable).focus()
        expr = self.query_one("#expr", Input)
        expr.value, expr.display, expr.disabled = self.view.expr, bool(self.view.expr), True
        self.render_jobs()  # the empty frame, drawn while the producers load

    async def mount_footer(self) -> None:
        """The key bar, once the first rows are on screen or the first read ended: mounted with
        the board, its key widgets (Textual's FooterKey) were styled twice over, on the UI
        thread, while the readers waited for the GIL to bring the first rows."""
        if self.footer_mounted or not self.is_attached:
            return
        self.footer_mounted = True
        await self.mount(Footer())
        self.refresh_bindings()  # a footer shows its keys when told of the bindings

    # --- what the app hands over: (snapshot, view) -> the board ----------------------------

    def show_jobs(self, jobs: JobsSnapshot) -> None:
        """A new snapshot of the job index."""
        self.jobs = jobs
        if self.state.note == READING and self.board.visible:  # rows land while the read goes on
            self._pacer.request()
        else:  # the first rows, and every change after the first read: at once
            self._draw_snapshot()

    def scan_finished(self, error: str | None) -> None:
        note = f"scan failed: {error}" if error else ""
        self.state = views.with_note(self.state, note)  # the last rows of the read, not paced
        self.call_after_refresh(self.mount_footer)  # a read without rows: now

    def show_note(self, note: str) -> None:
        """A note on the status line (a producer that failed)."""
        self.state = views.with_note(self.state, note)

    def _draw_snapshot(self) -> None:
        if self.app.is_running:  # the index runs until the app unmounts: not after
            self.render_jobs()
            if self.jobs is not None and self.jobs.jobs and not self.footer_mounted:
                self.call_after_refresh(self._first_rows_drawn)

    async def _first_rows_drawn(self) -> None:
        self._first_rows()
        await self.mount_footer()

    def watch_state(self) -> None:
        self.render_jobs()

    def render_jobs(self) -> None:
        if not (self.is_attached and self.app.is_running):  # a snapshot or key while shutting
            return
        with contextlib.suppress(NoMatches):  # shutting down: the widgets are already gone
            self.board.draw(self, self.jobs, self.state)

    # --- events from widgets: each makes a new view ----------------------------------------

    def on_runs_table_row_highlighted(self, message: RunsTable.RowHighlighted) -> None:
        if self.is_attached and self.app.is_running:
            self.state = views.with_cursor(self.state, message.key)

    def on_runs_table_toggle_select(self, message: RunsTable.ToggleSelect) -> None:
        self.state = views.toggle_selected(self.state, message.key)

    def on_runs_table_focus_job(self, message: RunsTable.FocusJob) -> None:
        self.state = views.toggle_focus(self.state, message.key)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "expr":
            self.state = views.with_expression(self.state, event.value)
        else:
            self.state = views.with_pattern(self.state, event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._close_box(event.input.id or "filter")

    # --- the name filter (`/`) and the expression (`f`) boxes -------------------------------

    def _open_box(self, box_id: str) -> None:
        box = self.query_one(f"#{box_id}", Input)
        box.disabled, box.display = False, True
        box.focus()

    def _close_box(self, box_id: str) -> None:
        """Back to the list; a box whose text applies stays in view but cannot take the focus
        (Tab into it made `q` type instead of quit)."""
        kept = self.view.expr if box_id == "expr" else self.state.pattern
        box = self.query_one(f"#{box_id}", Input)
        box.display, box.disabled = bool(kept), True
        self.query_one(RunsTable).focus()

    def action_filter(self) -> None:
        self._open_box("filter")

    def action_expression(self) -> None:
        self._open_box("expr")

    def action_escape(self) -> None:
        """Closes the key panel first; in the expression box clears the expression only; else
        leaves the focused job and clears the name filter (distmon.view.escaped)."""
        if self.query(HelpPanel):
            self.app.action_hide_help_panel()
            return
        expr = self.query_one("#expr", Input)
        if expr.has_focus:
            expr.value = ""
            self.state = views.with_expression(self.state, "")
            self._close_box("expr")
            return
        box = self.query_one("#filter", Input)
        typing, before = box.has_focus, self.state
        self.state = views.escaped(before, typing)
        if typing or self.state.pattern != before.pattern:
            box.value = ""
            self._close_box("filter")

    # --- the palette's lists ---------------------------------------------------------------

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
        return [*self.tag_choices(), *table_choices(self), *self.x_axis_choices()]

    # --- the keys' actions -----------------------------------------------------------------

    def action_help(self) -> None:
        """Textual's key panel, beside the board: every key with its tooltip."""
        if self.query(HelpPanel):
            self.app.action_hide_help_panel()
        else:
            self.app.action_show_help_panel()

    def action_pick_tag(self) -> None:
        self.app.push_screen(palette(self.tag_choices(), "tag for the second chart…"))

    def action_x_mode(self) -> None:
        self.state = views.next_x_mode(self.state)

    def action_log_scale(self) -> None:
        self.state = views.toggle_log(self.state)

    def action_smoothing(self, direction: int) -> None:
        self.state = views.smoothed(self.state, direction)

    def action_grid(self) -> None:
        from distmon.widgets.grid import ChartGridScreen  # not before it is asked for

        self.app.push_screen(ChartGridScreen(self.charted, self._refresh_every))

    def charted(self) -> tuple[Job, ...]:
        """The jobs the charts show: the focused one, or the overlaid ones."""
        return self.board.charted(self.jobs, self.state)

    def action_reload(self) -> None:
        """Read every logdir again (the watcher's scan), then a fresh snapshot."""
        if self._reload():
            self.state = views.with_note(self.state, "reloading…")

    def action_sort_column(self) -> None:
        self.app.push_screen(palette(sort_choices(self), "sort by…"))

    def action_reverse_sort(self) -> None:
        self.view = dataclasses.replace(self.view, reverse=not self.view.reverse)

    def action_group(self) -> None:
        self.app.push_screen(palette(group_choices(self), "group by…"))

    def action_overlay(self) -> None:
        self.view = self.view.next_overlay()

    def action_columns(self) -> None:
        def chosen(columns: frozenset[str] | None) -> None:
            if columns is not None:
                self.view = dataclasses.replace(self.view, columns=columns)

        chooser = ColumnsChooser(listed_columns(self), shown_columns(self))
        self.app.push_screen(chooser, chosen)
