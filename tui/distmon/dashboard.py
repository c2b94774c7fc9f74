"""The dashboard's screen: the board's widgets under the app's keys.

The app's default screen (`App.get_default_screen`), so the board has one owner however many
screens (help, the command palette) are on top of it. Textual's horizontal breakpoints set
`-wide` from 120 columns (distmon.tcss puts runs and charts side by side there); the class is
also set before the widgets are first styled, as a Resize only comes after the first frame and
a class set then styled the whole board a second time.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Input

from distmon.board import board_widgets
from distmon.widgets.runs import RunsTable

WIDE = 120  # columns from which runs and charts sit side by side
TITLES = (("runs", "runs"), ("gpus", "GPUs"), ("alerts", "alerts"), ("details", "focused"))


class DashboardScreen(Screen[Any]):
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (WIDE, "-wide")]  # noqa: RUF012 - Textual's

    def __init__(self, expression: str) -> None:
        super().__init__()
        self._expression = expression
        self.footer_mounted = False

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
        expr.value, expr.display, expr.disabled = self._expression, bool(self._expression), True

    async def mount_footer(self) -> None:
        """The key bar, once the first rows are on screen or the first read ended: mounted with
        the board, its key widgets were styled twice over (Textual's FooterKey), 0.1-0.2 s of
        the UI thread's CPU while the readers waited for the GIL to bring the first rows."""
        if self.footer_mounted or not self.is_attached:
            return
        self.footer_mounted = True
        await self.mount(Footer())
        self.refresh_bindings()  # a footer shows its keys when told of the bindings
