"""Every key of the dashboard is declared in distmon.keymaps, and each one names an action that
its screen or widget (or, with `app.`, the app) has: a key moved between classes, or a list
taken by the wrong class, would do nothing when pressed."""

from __future__ import annotations

import pytest
from textual.binding import Binding, BindingType

from distmon import keymaps
from distmon.app import DistmonApp
from distmon.dashboard import DashboardScreen
from distmon.widgets.panels import Panel
from distmon.widgets.runs import RunsTable
from distmon.widgets.table_screens import ColumnsChooser

OWNERS = [
    (DashboardScreen, keymaps.DASHBOARD),
    (RunsTable, keymaps.RUNS_TABLE),
    (Panel, keymaps.PANEL),
    (ColumnsChooser, keymaps.COLUMNS_CHOOSER),
]


@pytest.mark.parametrize(("owner", "bindings"), OWNERS)
def test_each_class_takes_its_keys_from_the_keymaps(
    owner: type, bindings: list[BindingType]
) -> None:
    assert owner.BINDINGS is bindings  # type: ignore[attr-defined]


@pytest.mark.parametrize(("owner", "bindings"), OWNERS)
def test_every_key_names_an_action_its_owner_has(
    owner: type, bindings: list[BindingType]
) -> None:
    for binding in bindings:
        assert isinstance(binding, Binding)
        action = binding.action.partition("(")[0]
        namespace, _, name = action.rpartition(".")
        target = DistmonApp if namespace == "app" else owner
        assert callable(getattr(target, f"action_{name}", None)), (owner.__name__, binding)


def test_no_key_is_bound_twice_on_the_dashboard() -> None:
    keys = [k for b in keymaps.DASHBOARD if isinstance(b, Binding) for k in b.key.split(",")]
    assert len(keys) == len(set(keys))
