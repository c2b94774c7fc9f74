"""The runs table's cursor while a sweep's first read lands (the newest runs first, then the
rest, many of them inserted above): it stays on the first row, whatever job lands there,
until the user moves it; then it follows the job they chose. Pilot tests on a real watched
logdir (tensorboardX -> LogdirWatcher -> RunStore -> JobIndex -> app), the read held after
its newest runs until the test has acted."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from distcore.events import first_read, watch
from distmon.widgets.runs import RunsTable
from tests.kit.wait import until
from tests.tui.test_table_keys import TIMEOUT, app_over, keys
from tests.tui.test_table_scale import write_runs

NAMES = [f"run{i:02}" for i in range(24)]  # written in order: the newest sort last


def hold_the_read(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """The first read stops once its newest 4 runs are in the store and drawn (the watcher
    waits for that draw anyway), until the event is set: the rest is not begun."""
    gate = threading.Event()
    wait = watch.LogdirWatcher._wait_for_the_draw

    def held(self: watch.LogdirWatcher) -> None:
        wait(self)
        gate.wait(TIMEOUT)

    monkeypatch.setattr(watch.LogdirWatcher, "_wait_for_the_draw", held)
    monkeypatch.setattr(first_read, "FIRST_RUNS", 4)
    return gate


async def nothing(pilot: Any) -> None:
    pass


async def key_j(pilot: Any) -> None:
    await pilot.press("j")


async def click_second_row(pilot: Any) -> None:
    await pilot.click(RunsTable, offset=(10, 3))  # border, header, row 0, then row 1


async def read_held_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, act: Callable[[Any], Awaitable[None]]
) -> tuple[tuple[int, str | None], dict[str, object]]:
    """`act` on the rows of the newest runs; the cursor's row and job right after it, and
    where the cursor is (its row, its job, the charts' job, the scroll) once every run is
    listed."""
    write_runs(tmp_path, NAMES)
    gate = hold_the_read(monkeypatch)
    app = app_over(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(RunsTable)
        try:
            await until(
                pilot,
                lambda: keys(app) == NAMES[-4:] and app.dashboard.state.cursor_job == "run20",
                "the newest rows, the cursor on the first",
            )
            await act(pilot)
            acted = (table.cursor_row, table.current_key)
        finally:
            gate.set()
        await until(pilot, lambda: keys(app) == NAMES, "every run listed")
        await pilot.pause()
        return acted, {
            "row": table.cursor_row, "key": table.current_key,
            "charts": app.dashboard.state.cursor_job, "scroll": table.scroll_y,
        }  # fmt: skip


async def test_untouched_the_cursor_stays_on_the_first_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, cursor = await read_held_then(tmp_path, monkeypatch, nothing)
    # The charts show the job on the first row, as the table does.
    assert cursor == {"row": 0, "key": "run00", "charts": "run00", "scroll": 0}


@pytest.mark.parametrize("act", [key_j, click_second_row], ids=["key", "click"])
async def test_once_moved_the_cursor_follows_the_chosen_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, act: Callable[[Any], Awaitable[None]]
) -> None:
    (row, chosen), cursor = await read_held_then(tmp_path, monkeypatch, act)
    assert row == 1 and chosen == "run21"
    assert cursor["key"] == cursor["charts"] == chosen
    assert cursor["row"] == NAMES.index(chosen) > 1  # moved down as runs landed above it
