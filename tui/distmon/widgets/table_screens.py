"""The comparison table's column chooser: tick which comparison columns show (sort and group
pick from the command palette, distmon.commands)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import SelectionList
from textual.widgets.selection_list import Selection

from distcore.textsafe import terminal_text
from distmon import keymaps


class ColumnsChooser(ModalScreen[frozenset[str] | None]):
    """Tick the comparison columns to show; escape or enter applies the ticks."""

    BINDINGS: ClassVar[list[BindingType]] = keymaps.COLUMNS_CHOOSER

    def __init__(self, columns: Sequence[str], shown: Sequence[str]) -> None:
        super().__init__()
        self._columns, self._shown = columns, set(shown)

    def compose(self) -> ComposeResult:
        selections = [
            Selection(Content(terminal_text(c, 60)), c, c in self._shown) for c in self._columns
        ]
        with Vertical(id="picker"):
            yield SelectionList[str](*selections)

    def on_mount(self) -> None:
        self.query_one("#picker").border_title = "columns: space ticks, a all, n none"

    def action_all(self, tick: bool) -> None:
        chooser = self.query_one(SelectionList)
        chooser.select_all() if tick else chooser.deselect_all()

    def action_apply(self) -> None:
        self.dismiss(frozenset(self.query_one(SelectionList).selected))
