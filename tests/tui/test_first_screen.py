"""The first screen on a sweep: the key bar is mounted once the first rows are drawn or the
first read ended, so that styling its key widgets does not hold the UI thread (and the GIL)
while the readers bring the first rows; mounted late, it still shows every key."""

from __future__ import annotations

import threading
from pathlib import Path

from textual.widgets import Footer

from distmon.app import DistmonApp
from distmon.options import Options
from distmon.producers import Producers
from distmon.widgets.runs import RunsTable
from tests.kit.wait import until
from tests.tui.fixed import FixedRuns, run, series

TIMEOUT = 60.0  # bounds a failure only: a loaded 2-core machine is slow


def keys(app: DistmonApp) -> list[str]:
    return [key.key for key in app.screen.query("FooterKey")]  # type: ignore[attr-defined]


async def test_the_key_bar_waits_for_the_first_rows(tmp_path: Path) -> None:
    gate = threading.Event()  # the producers' build (its imports, in real life) is under way

    def producers() -> Producers:
        gate.wait(TIMEOUT)
        return Producers(FixedRuns([run("exp1", series("loss", [1.0, 0.5]))]))

    app = DistmonApp(Options(logdirs=(tmp_path,), refresh=0.2), producers=producers)
    main = app.dashboard
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            assert app.query_one("#runs", RunsTable) and not app.screen.query(Footer)
            gate.set()
            await until(pilot, lambda: "q" in keys(app), "the key bar")
            assert {"q", "question_mark", "slash"} <= set(keys(app))
            assert main.jobs is not None and [j.name for j in main.jobs.jobs] == ["exp1"]
            assert len(app.screen.query(Footer)) == 1
    finally:
        gate.set()


async def test_a_read_without_rows_shows_the_key_bar_when_it_ends(tmp_path: Path) -> None:
    app = DistmonApp(Options(logdirs=(tmp_path,), refresh=0.2, no_gpu=True))  # the real ones
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: "q" in keys(app), "the key bar")
        assert app.dashboard.jobs is None or not app.dashboard.jobs.jobs
        await pilot.press("q")
