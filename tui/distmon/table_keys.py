"""The dashboard's comparison-table keys: sort by a column, reverse it, filter by an expression,
group by an hparam, overlay the top N on the charts, choose the columns: a sweep's
hundreds of runs compared by their hyperparameters.

A mixin of DistmonApp so that the app's file keeps to the panels; the state is one frozen
`TableView` and every key replaces it and renders again (pure functions in compare_view).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from textual.binding import Binding, BindingType
from textual.widgets import Input

from distcore.table import FIXED_COLUMNS
from distmon.widgets.compare_view import Arranged, TableView
from distmon.widgets.runs import RunsTable
from distmon.widgets.table_screens import NONE, ColumnPicker, ColumnsChooser

if TYPE_CHECKING:
    from textual.app import App

    _Base = App[int]
else:
    _Base = object

TABLE_BINDINGS: list[BindingType] = [
    Binding("s", "sort_column", "sort"),
    Binding("S", "reverse_sort", "reverse", show=False),
    Binding("f", "expression", "where"),
    Binding("g", "group", "group", show=False),
    Binding("o", "overlay", "top N", show=False),
    Binding("c", "columns", "columns", show=False),
]


class TableKeys(_Base):
    view: TableView
    _arranged: Arranged | None

    def render_jobs(self) -> None: ...  # DistmonApp's

    def set_view(self, view: TableView) -> None:
        if view != self.view:
            self.view = view
            self.render_jobs()

    def _choices(self) -> tuple[str, ...]:
        return self._arranged.choices if self._arranged is not None else ()

    def action_sort_column(self) -> None:
        def chosen(column: str | None) -> None:
            if column is not None:
                self.set_view(dataclasses.replace(self.view, sort=column))

        self.push_screen(ColumnPicker("sort by", (*FIXED_COLUMNS, *self._choices())), chosen)

    def action_reverse_sort(self) -> None:
        self.set_view(dataclasses.replace(self.view, reverse=not self.view.reverse))

    def action_group(self) -> None:
        def chosen(column: str | None) -> None:
            if column is not None:
                group = None if column == NONE else column
                self.set_view(dataclasses.replace(self.view, group=group))

        hparams = self._arranged.hparams if self._arranged is not None else ()
        self.push_screen(ColumnPicker("group by", ("status", *hparams), True), chosen)

    def action_overlay(self) -> None:
        self.set_view(self.view.next_overlay())

    def action_columns(self) -> None:
        def chosen(columns: frozenset[str] | None) -> None:
            if columns is not None:
                self.set_view(dataclasses.replace(self.view, columns=columns))

        shown = self._arranged.columns if self._arranged is not None else ()
        self.push_screen(ColumnsChooser(self._choices(), shown), chosen)

    def action_expression(self) -> None:
        box = self.screen_stack[0].query_one("#expr", Input)
        box.disabled = False
        box.display = True
        box.focus()

    def close_expression(self) -> None:
        """Back to the list; the box stays in view (not focusable: Tab must not enter it, so
        that `q` quits) while an expression applies."""
        box = self.screen_stack[0].query_one("#expr", Input)
        box.display = bool(self.view.expr)
        box.disabled = True
        self.screen_stack[0].query_one(RunsTable).focus()
