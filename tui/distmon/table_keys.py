"""The dashboard's comparison-table keys: sort by a column, reverse it, filter by an expression,
group by an hparam, overlay the top N on the charts, choose the columns: a sweep's
hundreds of runs compared by their hyperparameters.

A mixin of DistmonApp so that the app's file keeps to the panels; the state is one frozen
`TableView` and every key replaces it (pure functions in compare_view): the app's view state
changes, and its watcher renders once. Sort and group pick from the command palette.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from textual.binding import Binding, BindingType
from textual.widgets import Input

from distcore.table import FIXED_COLUMNS
from distmon.commands import Choice, choices, palette
from distmon.render.compare_view import Arranged, TableView
from distmon.widgets.runs import RunsTable
from distmon.widgets.table_screens import ColumnsChooser

if TYPE_CHECKING:
    from textual.app import App

    from distmon.dashboard import DashboardScreen

    _Base = App[int]
else:
    _Base = object

TABLE_BINDINGS: list[BindingType] = [
    Binding("s", "sort_column", "sort",
            tooltip="sort the jobs by a column (numbers as numbers, missing last)"),
    Binding("S", "reverse_sort", "reverse", show=False, tooltip="reverse the sort"),
    Binding("f", "expression", "where",
            tooltip="filter by expression: NAME OP VALUE,... e.g. lr<0.01,optimizer=adam"),
    Binding("g", "group", "group", show=False, tooltip="group the jobs by one hparam"),
    Binding("o", "overlay", "top N", show=False,
            tooltip="overlay the top 3, 5, 10 jobs by the sort column on the charts, then off"),
    Binding("c", "columns", "columns", show=False,
            tooltip="choose the comparison columns (hparams, TAG, TAG.min, TAG.max)"),
]


class TableKeys(_Base):
    view: TableView
    _arranged: Arranged | None
    dashboard: DashboardScreen

    def set_view(self, view: TableView) -> None:
        self.view = view  # a new view state: its watcher renders, once

    def _choices(self) -> tuple[str, ...]:
        return self._arranged.choices if self._arranged is not None else ()

    def sort_choices(self) -> list[Choice]:
        def pick(column: str) -> None:
            self.set_view(dataclasses.replace(self.view, sort=column))

        return choices("sort by ", (*FIXED_COLUMNS, *self._choices()), pick)

    def group_choices(self) -> list[Choice]:
        def pick(column: str | None) -> None:
            self.set_view(dataclasses.replace(self.view, group=column))

        hparams = self._arranged.hparams if self._arranged is not None else ()
        ungroup = Choice("group by nothing (one list)", lambda: pick(None))
        return choices("group by ", ("status", *hparams), pick, first=[ungroup])

    def column_choices(self) -> list[Choice]:
        shown = set(self._arranged.columns) if self._arranged is not None else set()

        def toggle(column: str) -> None:
            now = set(self._arranged.columns) if self._arranged is not None else set()
            self.set_view(dataclasses.replace(self.view, columns=frozenset(now ^ {column})))

        listed = self._choices()
        return [*choices("hide column ", [c for c in listed if c in shown], toggle),
                *choices("show column ", [c for c in listed if c not in shown], toggle)]

    def table_choices(self) -> list[Choice]:
        return [*self.sort_choices(), *self.group_choices(), *self.column_choices()]

    def action_sort_column(self) -> None:
        self.push_screen(palette(self.sort_choices(), "sort by…"))

    def action_reverse_sort(self) -> None:
        self.set_view(dataclasses.replace(self.view, reverse=not self.view.reverse))

    def action_group(self) -> None:
        self.push_screen(palette(self.group_choices(), "group by…"))

    def action_overlay(self) -> None:
        self.set_view(self.view.next_overlay())

    def action_columns(self) -> None:
        def chosen(columns: frozenset[str] | None) -> None:
            if columns is not None:
                self.set_view(dataclasses.replace(self.view, columns=columns))

        shown = self._arranged.columns if self._arranged is not None else ()
        self.push_screen(ColumnsChooser(self._choices(), shown), chosen)

    def action_expression(self) -> None:
        box = self.dashboard.query_one("#expr", Input)
        box.disabled = False
        box.display = True
        box.focus()

    def close_expression(self) -> None:
        """Back to the list; the box stays in view (not focusable: Tab must not enter it, so
        that `q` quits) while an expression applies."""
        box = self.dashboard.query_one("#expr", Input)
        box.display = bool(self.view.expr)
        box.disabled = True
        self.dashboard.query_one(RunsTable).focus()
