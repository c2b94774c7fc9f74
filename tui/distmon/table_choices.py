"""The comparison table's choices in the command palette: sort by a column, group by an hparam,
show or hide a column. A sweep's hundreds of runs compared by their hyperparameters.

Each choice replaces the table's view (one frozen `TableView`, replaced by pure functions in
compare_view) on a `TableOwner`, the dashboard's screen, whose view state then changes and
renders once. The lists are made from the table as last arranged; a choice reads the view and
the arrangement when it is picked, not when it was listed.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from distcore.table import FIXED_COLUMNS
from distmon.commands import Choice, choices
from distmon.render.compare_view import Arranged, TableView


class TableOwner(Protocol):
    @property
    def arranged(self) -> Arranged | None: ...  # the table as last drawn

    @property
    def view(self) -> TableView: ...

    @view.setter
    def view(self, table: TableView) -> None: ...


def listed_columns(owner: TableOwner) -> tuple[str, ...]:
    """Every comparison column the arranged jobs offer."""
    return owner.arranged.choices if owner.arranged is not None else ()


def shown_columns(owner: TableOwner) -> tuple[str, ...]:
    return owner.arranged.columns if owner.arranged is not None else ()


def sort_choices(owner: TableOwner) -> list[Choice]:
    def pick(column: str) -> None:
        owner.view = dataclasses.replace(owner.view, sort=column)

    return choices("sort by ", (*FIXED_COLUMNS, *listed_columns(owner)), pick)


def group_choices(owner: TableOwner) -> list[Choice]:
    def pick(column: str | None) -> None:
        owner.view = dataclasses.replace(owner.view, group=column)

    hparams = owner.arranged.hparams if owner.arranged is not None else ()
    ungroup = Choice("group by nothing (one list)", lambda: pick(None))
    return choices("group by ", ("status", *hparams), pick, first=[ungroup])


def column_choices(owner: TableOwner) -> list[Choice]:
    def toggle(column: str) -> None:
        now = set(shown_columns(owner))
        owner.view = dataclasses.replace(owner.view, columns=frozenset(now ^ {column}))

    shown, listed = set(shown_columns(owner)), listed_columns(owner)
    return [*choices("hide column ", [c for c in listed if c in shown], toggle),
            *choices("show column ", [c for c in listed if c not in shown], toggle)]


def table_choices(owner: TableOwner) -> list[Choice]:
    return [*sort_choices(owner), *group_choices(owner), *column_choices(owner)]
