"""The runs list: one row per job; space selects jobs to overlay, enter focuses one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from distcore.textsafe import terminal_text
from distmon.widgets.model import ROW_COLUMNS, JobRow

COLUMN_WIDTHS = {"": 2, "step": 8, "loss": 9, "acc": 6, "ex/s": 7, "wait": 4}
NAME_LIMIT = 80  # characters of a job's name in the table
STATUS_STYLE = {"live": "green", "idle": "yellow", "gone": "red"}


class RunsTable(DataTable[Text | str]):
    BINDINGS = [  # noqa: RUF012 - Textual's convention
        Binding("j", "cursor_down", "down", show=False),
        Binding("k", "cursor_up", "up", show=False),
        Binding("space", "toggle_select", "select"),
        Binding("enter", "focus_job", "focus"),
    ]

    @dataclass
    class ToggleSelect(Message):
        key: str

    @dataclass
    class FocusJob(Message):
        key: str

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self._rows: tuple[JobRow, ...] = ()
        self._selected: frozenset[str] = frozenset()

    def on_mount(self) -> None:
        # Fixed widths for the columns that change in place: re-measuring every column on each
        # update was the biggest cost of a live table. The job name sizes itself at rebuilds.
        for label in ROW_COLUMNS:
            self.add_column(label, key=label or "mark", width=COLUMN_WIDTHS.get(label))

    def show(self, rows: Sequence[JobRow], selected: frozenset[str]) -> None:
        """Update only what changed: cells in place when the row keys are the same."""
        rows = tuple(rows)
        if rows == self._rows and selected == self._selected:
            return
        if [r.key for r in rows] != [r.key for r in self._rows]:
            self._rebuild(rows, selected)
        else:
            for old, new in zip(self._rows, rows, strict=True):
                if old != new or (new.key in selected) != (new.key in self._selected):
                    self._update_row(new, new.key in selected)
        self._rows, self._selected = rows, selected

    def _cells(self, row: JobRow, selected: bool) -> list[Text | str]:
        mark = Text(row.mark, style=STATUS_STYLE.get(row.status, ""))
        mark.append("◆" if selected else " ", style="bold magenta")
        # The name comes from the logdir: control characters escaped, 10,000 characters elided.
        name = Text(terminal_text(row.name, NAME_LIMIT), style="bold magenta" if selected else "")
        return [mark, name, *row.cells()[2:]]

    def _rebuild(self, rows: tuple[JobRow, ...], selected: frozenset[str]) -> None:
        current = self.current_key
        self.clear()
        for row in rows:
            self.add_row(*self._cells(row, row.key in selected), key=row.key)
        keys = [r.key for r in rows]
        if current in keys:
            self.move_cursor(row=keys.index(current), animate=False)

    def _update_row(self, row: JobRow, selected: bool) -> None:
        for column, value in zip(ROW_COLUMNS, self._cells(row, selected), strict=True):
            self.update_cell(row.key, column or "mark", value)

    @property
    def current_key(self) -> str | None:
        if not self._rows or self.cursor_row < 0 or self.cursor_row >= len(self._rows):
            return None
        return self._rows[self.cursor_row].key

    def action_toggle_select(self) -> None:
        if (key := self.current_key) is not None:
            self.post_message(self.ToggleSelect(key))

    def action_focus_job(self) -> None:
        if (key := self.current_key) is not None:
            self.post_message(self.FocusJob(key))
