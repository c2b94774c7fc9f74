"""Modal screens of the comparison table: pick a column (to sort or group by), choose which
comparison columns show."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, SelectionList
from textual.widgets.option_list import Option
from textual.widgets.selection_list import Selection

from distcore.textsafe import terminal_text

NONE = "\x00none"  # the "no column" choice: no column's name starts with NUL
TABLE_KEYS: tuple[tuple[str, str], ...] = (
    ("s / S", "sort the jobs by a column (numbers as numbers, missing last) / reverse it"),
    ("f", "filter by expression: NAME OP VALUE,... e.g. lr<0.01,optimizer=adam"),
    ("g", "group the jobs by one hparam"),
    ("o", "overlay the top 3, 5, 10 jobs by the sort column on the charts, then off"),
    ("c", "choose the comparison columns (hparams, TAG, TAG.min, TAG.max)"),
)


class ColumnPicker(ModalScreen[str | None]):
    """One column out of `columns`; NONE for "none" when `allow_none`; None when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]  # noqa: RUF012

    def __init__(self, title: str, columns: Sequence[str], allow_none: bool = False) -> None:
        super().__init__()
        self._title, self._columns, self._allow_none = title, columns, allow_none

    def compose(self) -> ComposeResult:
        # Names from the logdir: escaped, elided, and plain Content (never read as markup).
        options = [Option(Content(terminal_text(c, 60)), id=c) for c in self._columns]
        if self._allow_none:
            options.insert(0, Option("(none)", id=NONE))
        with Vertical(id="picker"):
            yield OptionList(*options)

    def on_mount(self) -> None:
        self.query_one("#picker").border_title = self._title

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ColumnsChooser(ModalScreen[frozenset[str] | None]):
    """Tick the comparison columns to show; escape or enter applies the ticks."""

    BINDINGS = [  # noqa: RUF012
        Binding("escape,enter", "apply", "apply"),
        Binding("a", "all(True)", "all"),
        Binding("n", "all(False)", "none"),
    ]

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
