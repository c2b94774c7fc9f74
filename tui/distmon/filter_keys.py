"""The dashboard's name filter (`/`) and escape: the boxes' focus and display, and the new
view each key makes (distmon.view). A mixin of DistmonApp, beside distmon.table_keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import HelpPanel, Input

from distmon import view as views
from distmon.widgets.runs import RunsTable

if TYPE_CHECKING:
    from textual.app import App

    from distmon.dashboard import DashboardScreen
    from distmon.view import ViewState

    _Base = App[int]
else:
    _Base = object


class FilterKeys(_Base):
    if TYPE_CHECKING:
        state: ViewState
        dashboard: DashboardScreen

        def close_expression(self) -> None: ...  # distmon.table_keys's

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "expr":
            self.state = views.with_expression(self.state, event.value)
        else:
            self.state = views.with_pattern(self.state, event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "expr":
            self.close_expression()
        else:
            self._close_filter()

    def action_filter(self) -> None:
        box = self.dashboard.query_one("#filter", Input)
        box.disabled, box.display = False, True
        box.focus()

    def _close_filter(self) -> None:
        """Back to the list; the kept pattern stays in view but cannot take the focus (Tab
        into it made `q` type instead of quit)."""
        box = self.dashboard.query_one("#filter", Input)
        box.display, box.disabled = bool(self.state.pattern), True
        self.dashboard.query_one(RunsTable).focus()

    def action_escape(self) -> None:
        main = self.dashboard
        if main.query(HelpPanel):  # escape closes the key panel first
            self.action_hide_help_panel()
            return
        expr = main.query_one("#expr", Input)
        if expr.has_focus:  # escape in the expression box clears the expression only
            expr.value = ""
            self.state = views.with_expression(self.state, "")
            self.close_expression()
            return
        box = main.query_one("#filter", Input)
        typing, before = box.has_focus, self.state
        self.state = views.escaped(before, typing)
        if typing or self.state.pattern != before.pattern:
            box.value = ""
            self._close_filter()
