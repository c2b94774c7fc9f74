"""The dashboard at a sweep's scale: redraws paced by their cost, the header saying
how far the first read is, comparison cells shown as text (never markup). Pilot tests on real
watched logdirs (tensorboardX -> LogdirWatcher -> RunStore -> JobIndex -> app); the pacing
and note rules as parametrized tables."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distcore.events import first_read, watch
from distcore.textsafe import shown_names
from distmon.pace import Pacer
from distmon.render.compare_view import distinct_names, reading_note
from distmon.render.view_model import NAME_LIMIT
from distmon.widgets.runs import RunsTable
from tests.kit.wait import until
from tests.kit.writers import write_scalars
from tests.tui.test_table_keys import TIMEOUT, app_over, keys


@pytest.mark.parametrize(
    ("progress", "wanted"),
    [
        (None, "reading…"),
        ((0, 0), "reading…"),
        ((0, 10_000), "reading 0/10,000 runs…"),
        ((3_412, 10_000), "reading 3,412/10,000 runs…"),
        ((12, 10), "reading 10/10 runs…"),
    ],
)
def test_reading_note(progress: tuple[int, int] | None, wanted: str) -> None:
    assert reading_note(progress) == wanted


class Owner:
    """Textual's two calls the pacer makes, run by hand: a timer, and "after the refresh"."""

    def __init__(self) -> None:
        self.timers: list[tuple[float, Callable[[], object]]] = []
        self.after: list[Callable[[], object]] = []

    def set_timer(self, delay: float, callback: Callable[[], object]) -> object:
        self.timers.append((delay, callback))
        return None

    def call_after_refresh(self, callback: Callable[[], object]) -> object:
        self.after.append(callback)
        return None


def test_a_costly_draw_makes_the_next_requests_wait_and_coalesce() -> None:
    now = [100.0]
    owner, drawn = Owner(), []
    pacer = Pacer(
        owner, lambda: drawn.append(now[0]), share=0.25, clock=lambda: now[0],
        cost_clock=lambda: now[0],
    )  # fmt: skip
    pacer.request()  # the first at once
    assert drawn == [100.0]
    pacer.request()  # while its refresh is under way: waits for it
    now[0] += 0.2  # the draw and its refresh took 0.2 s
    owner.after.pop()()
    assert owner.timers and owner.timers[0][0] == pytest.approx(0.6)  # 3 x 0.2
    for _ in range(5):
        pacer.request()  # coalesce into the one timer
    assert len(owner.timers) == 1 and drawn == [100.0]
    now[0] += 0.6
    owner.timers.pop()[1]()
    assert drawn == [100.0, 100.8] and pacer.draws == 2


def write_runs(root: Path, names: list[str], hparams: dict[str, object] | None = None) -> None:
    from tensorboardX import SummaryWriter

    for name in names:
        with SummaryWriter(str(root / name)) as writer:
            for step in range(3):
                writer.add_scalar("loss", 1.0 / (step + 1), step)
            if hparams is not None:
                writer.add_hparams(hparams, {"hparam/best": 0.5})


async def test_an_hparam_value_that_looks_like_markup_shows_as_written(tmp_path: Path) -> None:
    write_runs(tmp_path, ["a"], {"opt": "[b]x"})
    app = app_over(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(RunsTable)
        await until(pilot, lambda: keys(app) == ["a"] and "c:opt" in table.columns, "a's opt")
        await pilot.pause()
        line = lambda: table.render_line(1).text  # noqa: E731 - row 0, under the header
        await until(pilot, lambda: "[b]x" in line(), "opt's cell as written")


async def test_the_header_says_how_far_the_first_read_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"run{i:02}" for i in range(24)]
    write_runs(tmp_path, names)
    # The read holds once the newest few have landed, until the test has seen the header.
    gate, landed = threading.Event(), []
    apply = watch.LogdirWatcher._apply

    def held_apply(self: watch.LogdirWatcher, run: Any, path: Path, batch: Any) -> None:
        apply(self, run, path, batch)
        landed.append(run.name)
        if len(landed) > 4:  # the newest 4 read and told: the rest waits
            gate.wait(TIMEOUT)

    monkeypatch.setattr(watch.LogdirWatcher, "_apply", held_apply)
    monkeypatch.setattr(first_read, "FIRST_RUNS", 4)
    app = app_over(tmp_path)
    status = lambda: str(app.query_one("#status").render())  # noqa: E731
    async with app.run_test(size=(160, 48)) as pilot:
        try:
            await until(
                pilot,
                lambda: re.search(r"reading \d+/24 runs…", status()) and "run23" in keys(app),
                "the newest rows and the read's progress",
            )
            assert len(keys(app)) < 24
        finally:
            gate.set()
        await until(pilot, lambda: keys(app) == names and "reading" not in status(), "the end")
        made = app.producers.made
        assert made is not None and made.watcher.progress() is None  # type: ignore[union-attr]
        table = app.query_one(RunsTable)  # its scrollable size kept without measuring cells
        await until(pilot, lambda: table.virtual_size.height == 24 + 1, "24 rows and a header")
        widths = sum(c.render_width for c in table.columns.values())
        assert table.virtual_size.width == widths


@pytest.mark.parametrize(
    "names",
    [
        [],
        ["lr-sweep-00001", "lr-sweep-00000", "a"],
        ["t\udcff", "t\\xff", "t\\xff #2"],  # print alike: the one rule's suffixes
        ["a" * 200, "a" * 199 + "b"],  # elided alike
        ["tab\there", "plain"],  # escaped
        ["x #2", "x"],
        ["ok", "\x1b[31mred"],
    ],
)
def test_distinct_names_are_shown_names(names: list[str]) -> None:
    plain: dict[str, bool] = {}
    for _ in range(2):  # the cache of plain names, cold then warm
        assert distinct_names(names, plain) == shown_names(names, NAME_LIMIT)
    grown = [*names, "new-job"]
    assert distinct_names(grown, plain) == shown_names(grown, NAME_LIMIT)


async def test_snapshots_with_the_same_jobs_go_over_none_of_them_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index hands over a snapshot every refresh (its hosts, its time); with 100,000 idle
    jobs, arranging them and looking up the charted ones among all of them each time was most
    of the dashboard's idle CPU, and then drawing the table again (its title set anew)."""
    from distmon import board, view
    from tests.core.test_jobs_incremental import age

    for name in ("a", "b", "c"):
        write_scalars(tmp_path / name, [1.0, 0.5], time.time() - 5000)
        age(tmp_path / name, 5000)  # long silent: no clock-dependent rule changes them
    counted: list[str] = []
    arrange, shown = board.ViewRows.arrange, view.shown_jobs
    draws: list[int] = []
    draw = board.Board.draw

    def counting(name: str, call: Any) -> Any:
        def counted_call(*a: Any, **k: Any) -> Any:
            if name == "draw":
                draws.append(1)
            else:
                counted.append(name)
            return call(*a, **k)
        return counted_call

    monkeypatch.setattr(board.ViewRows, "arrange", counting("arrange", arrange))
    monkeypatch.setattr(view, "shown_jobs", counting("shown", shown))
    monkeypatch.setattr(board.Board, "draw", counting("draw", draw))
    monkeypatch.setattr(RunsTable, "refresh", counting("table redrawn", RunsTable.refresh))
    app = app_over(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: keys(app) == ["a", "b", "c"] and app.dashboard.jobs is not None
                    and "reading" not in str(app.query_one("#status").render()), "the runs")
        jobs = app.dashboard.jobs.jobs if app.dashboard.jobs is not None else ()
        await pilot.pause(0.1)
        before, drawn = len(counted), len(draws)
        await until(pilot, lambda: len(draws) >= drawn + 5, "five more snapshots drawn")
        # nothing changed: the same jobs
        assert app.dashboard.jobs is not None and app.dashboard.jobs.jobs is jobs
        assert counted[before:] == []
