"""Pilot tests: every key binding, filtering, selection, focus, help, and live updates."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.binding import Binding
from textual.command import CommandPalette
from textual.widgets import HelpPanel, Input, KeyPanel, Markdown
from textual.widgets._key_panel import BindingsTable

from distmon.dashboard import DashboardScreen
from distmon.widgets.charts import LineChart
from distmon.widgets.panels import Panel
from distmon.widgets.runs import RunsTable
from tests.kit.wait import until
from tests.tui.conftest import MakeApp, choose, palette_names, ready, simulated_gpus, standard_runs
from tests.tui.fixed import FixedRuns, keras_job, run, series

JOBS = ["input_bound", "pytorch/exp1", "quickstart"]


def row_keys(table: RunsTable) -> list[str]:
    return list(table.row_keys)


async def test_first_screen_lists_jobs_and_pairs_train_with_validation(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.pause()
        assert row_keys(app.query_one(RunsTable)) == JOBS
        loss = app.query_one("#chart-loss", LineChart)
        labels = [c.label for c in loss._curves]
        assert labels == ["input_bound/train", "input_bound/validation"]


async def test_q_quits(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await ready(pilot)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_help_is_the_key_panel_of_every_binding_and_closes(make_app: MakeApp) -> None:
    """`?` shows Textual's key panel: the bindings themselves, each with its tooltip, and the
    focused table's own help (the marks); `?` or escape closes it."""
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        for close in ("question_mark", "escape"):
            await pilot.press("question_mark")
            await until(pilot, lambda: bool(app.screen.query(HelpPanel)), "the key panel")
            await pilot.pause()
            table = app.screen.query_one(KeyPanel).query_one(BindingsTable)
            console = Console(record=True, width=200, file=io.StringIO())
            console.print(table.render_bindings_table())
            text = console.export_text()
            for binding in DashboardScreen.BINDINGS:
                assert isinstance(binding, Binding)
                if binding.tooltip:
                    assert binding.tooltip in text
            assert "space" in text and "enter" in text  # the runs table's keys
            shown = str(app.screen.query_one(HelpPanel).query_one(Markdown).source)
            assert "● live" in shown
            await pilot.press(close)
            await until(pilot, lambda: not app.screen.query(HelpPanel), "the panel to close")


async def test_slash_filters_by_regex_and_escape_clears(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await ready(pilot)
        table = app.query_one(RunsTable)
        await pilot.press("slash")
        assert app.query_one("#filter", Input).has_focus
        await pilot.press(*"^(quick|py)")
        await pilot.pause()
        assert row_keys(table) == ["pytorch/exp1", "quickstart"]
        await pilot.press("enter")  # keeps the filter, back to the list
        await pilot.pause()
        assert table.has_focus and row_keys(table) == ["pytorch/exp1", "quickstart"]
        await pilot.press("escape")
        await pilot.pause()
        assert row_keys(table) == JOBS and app.dashboard.state.pattern == ""


async def test_half_typed_regex_matches_literally(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await ready(pilot)
        await pilot.press("slash", *"(inp")
        await pilot.pause()
        assert row_keys(app.query_one(RunsTable)) == []
        await pilot.press("backspace", "backspace", "backspace", "backspace", *"inp")
        await pilot.pause()
        assert row_keys(app.query_one(RunsTable)) == ["input_bound"]


async def test_j_k_and_arrows_move_the_cursor_and_the_charts_follow(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await ready(pilot)
        table = app.query_one(RunsTable)
        await pilot.press("j")
        assert table.current_key == "pytorch/exp1"
        await pilot.pause()
        assert [c.label for c in app.query_one("#chart-loss", LineChart)._curves] == [
            "pytorch/exp1"
        ]
        await pilot.press("down")
        assert table.current_key == "quickstart"
        await pilot.press("k", "up")
        assert table.current_key == "input_bound"


async def test_space_selects_jobs_to_overlay(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await ready(pilot)
        await pilot.press("space", "j", "j", "space")
        await pilot.pause()
        assert app.dashboard.state.selected == {"input_bound", "quickstart"}
        curves = app.query_one("#chart-loss", LineChart)._curves
        assert {c.label for c in curves} == {
            "input_bound/train",
            "input_bound/validation",
            "quickstart/train",
            "quickstart/validation",
        }
        assert len({c.color for c in curves}) == 2
        await pilot.press("space")
        await pilot.pause()
        assert app.dashboard.state.selected == {"input_bound"}


async def test_enter_focuses_a_job_and_shows_its_plan(make_app: MakeApp, tmp_path: Path) -> None:
    import json

    job = tmp_path / "quickstart"
    job.mkdir()
    plan = {
        "replicas": 4,
        "per_replica_batch_size": 32,
        "global_batch_size": 128,
        "base_learning_rate": 0.01,
        "scaling_rule": "linear",
        "learning_rate": 0.04,
    }
    (job / "run.json").write_text(json.dumps({"status": "running", "plan": plan}))
    app = make_app(FixedRuns(keras_job("quickstart", root=tmp_path)).snapshot())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("enter")
        await pilot.pause()
        details = app.query_one("#details", Panel)
        assert details.display and app.dashboard.state.focused_job == "quickstart"
        text = str(details.render())
        assert "4 replicas" in text and "global batch 128" in text
        assert "0.01 @ batch 32 × 4 replicas (linear) = 0.04" in text and "running" in text
        await pilot.press("escape")
        await pilot.pause()
        assert not details.display and app.dashboard.state.focused_job is None


async def test_focus_shows_that_job_alone_even_with_a_selection(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await ready(pilot)
        await pilot.press("space", "j", "j", "enter")
        await pilot.pause()
        labels = {c.label for c in app.query_one("#chart-loss", LineChart)._curves}
        assert labels == {"quickstart/train", "quickstart/validation"}


async def test_tab_moves_between_panels(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await ready(pilot)
        seen = []
        for _ in range(5):
            seen.append(app.focused.id if app.focused else None)
            await pilot.press("tab")
        assert seen == ["runs", "chart-loss", "chart-second", "gpus", "alerts"]
        assert app.focused is not None and app.focused.id == "runs"  # wrapped around
        await pilot.press("shift+tab")
        assert app.focused is not None and app.focused.id == "alerts"


async def test_t_picks_any_tag_for_the_second_chart(make_app: MakeApp) -> None:
    app = make_app()
    main = app.dashboard
    async with app.run_test() as pilot:
        await ready(pilot)
        await choose(pilot, app, "t", "tag: perf/input_wait_fraction")
        chart = app.query_one("#chart-second", LineChart)
        await until(pilot, lambda: main.state.second_tag == "perf/input_wait_fraction", "the tag")
        await until(pilot, lambda: chart._curves and chart._curves[0].ys[-1] == 0.34, "its curve")
        await choose(pilot, app, "t", "tag: loss and accuracy")  # back to the default pair
        await until(pilot, lambda: main.state.second_tag == "accuracy", "the default pair")


async def test_the_palette_fuzzy_finds_any_choice_and_shows_names_as_written(
    make_app: MakeApp,
) -> None:
    """ctrl+p searches tags, sort and group columns, columns and the x axis; a tag that looks
    like markup is shown as written."""
    runs = [*standard_runs(), run("aaa/train", series("[b]loss[/b]", [1.0, 0.5]))]  # first row
    app = make_app(runs)
    main = app.dashboard
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"sortstep")
        await until(pilot, lambda: "sort by step" in palette_names(app), "the fuzzy match")
        assert "tag: [b]loss[/b]" not in palette_names(app)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, CommandPalette), "closed")
        await choose(pilot, app, "ctrl+p", "x axis: wall")
        await until(pilot, lambda: main.state.x_mode == "wall", "the x axis")
        await choose(pilot, app, "t", "tag: [b]loss[/b]")
        await until(pilot, lambda: main.state.second_tag == "[b]loss[/b]", "the tag as written")


async def test_smoothing_x_axis_and_log_keys(make_app: MakeApp) -> None:
    app = make_app()
    main = app.dashboard
    async with app.run_test() as pilot:
        await ready(pilot)
        chart = app.query_one("#chart-loss", LineChart)
        raw = chart._curves[0].ys
        await pilot.press("plus", "plus")
        assert main.state.smoothing == 0.8
        await pilot.press(*["minus"] * 9)
        assert main.state.smoothing == 0.0
        await pilot.pause()
        assert chart._curves[0].ys != raw  # unsmoothed now: the raw values
        assert "ema 0" in str(chart.border_title)
        await pilot.press("x")
        assert main.state.x_mode == "relative" and chart._curves[0].xs[0] == 0.0
        await pilot.press("x")
        assert main.state.x_mode == "wall" and chart._curves[0].xs[0] > 1e9
        await pilot.press("x", "l")
        assert main.state.x_mode == "step" and main.state.log_y and "log" in str(chart.border_title)
        await pilot.press("l")
        assert not main.state.log_y


async def test_r_reloads_what_the_store_holds(make_app: MakeApp) -> None:
    store = FixedRuns(keras_job("a"))
    app = make_app(store=store, refresh=3600.0)  # no tick would see the change: only "r"
    async with app.run_test() as pilot:
        await ready(pilot)
        assert row_keys(app.query_one(RunsTable)) == ["a"]
        store._runs = (*store._runs, *keras_job("b"))  # changed without a notification
        await pilot.pause(1.0)
        assert row_keys(app.query_one(RunsTable)) == ["a"]  # not seen without a reload
        await pilot.press("r")  # wakes the index, which reads the store again
        await until(pilot, lambda: row_keys(app.query_one(RunsTable)) == ["a", "b"], "rows a, b")
        assert row_keys(app.query_one(RunsTable)) == ["a", "b"]


async def test_changes_from_the_watcher_thread_fill_in(make_app: MakeApp) -> None:
    store = FixedRuns([])
    app = make_app(store=store)
    async with app.run_test() as pilot:
        await ready(pilot)
        assert row_keys(app.query_one(RunsTable)) == []
        writer = threading.Thread(target=store.replace, args=(standard_runs(),))
        writer.start()
        writer.join()
        await until(pilot, lambda: row_keys(app.query_one(RunsTable)) == JOBS, "every job's row")
        assert row_keys(app.query_one(RunsTable)) == JOBS


async def test_alerts_panel_and_gpu_panel(make_app: MakeApp) -> None:
    app = make_app(snaps=simulated_gpus())
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        await pilot.pause()
        alerts = str(app.query_one("#alerts", Panel).render())
        assert "highly input-bound" in alerts and "GPUs unevenly used" in alerts
        assert "GPU 1 memory 99% full" in alerts
        gpus = app.query_one("#gpus", Panel)
        assert "simulated" in str(gpus.border_title)
        assert str(gpus.render()).count("NVIDIA A100") == 2


async def test_without_nvml_the_reason_is_in_the_panel(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await ready(pilot)
        await pilot.pause()
        text = str(app.query_one("#gpus", Panel).render())
        assert "no GPU: NVML library not found" in text
        assert row_keys(app.query_one(RunsTable)) == JOBS  # everything else works


def two_worker_job() -> list[Any]:
    from tests.tui.fixed import NOW, system_run

    return [
        *keras_job("multi"),
        system_run("multi", 0, host="gpu7"),
        system_run("multi", 1, end=NOW - 120),  # no hparams: named after its folder; stale
    ]


async def test_gpu_panel_lists_local_gpus_then_each_worker(make_app: MakeApp) -> None:
    app = make_app(two_worker_job(), simulated_gpus())
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        gpus = app.query_one("#gpus", Panel)
        lines = str(gpus.render()).splitlines()
        assert lines[0].startswith("0 NVIDIA A100") and lines[1].startswith("1 NVIDIA A100")
        first = next(i for i, line in enumerate(lines) if line.startswith("gpu7"))
        assert lines[first].startswith("gpu7 · worker 0 · job multi · 1 s ago")
        assert lines[first + 1].startswith("0 GPU") and lines[first + 2].startswith("1 GPU")
        second = next(i for i, line in enumerate(lines) if line.startswith("multi worker 1 ·"))
        assert lines[second].endswith("120 s ago stale")
        assert "2 more hosts" in str(gpus.border_title)


async def test_a_job_keeps_its_colour_on_every_chart_as_others_come_and_go(
    make_app: MakeApp,
) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await ready(pilot)
        loss = app.query_one("#chart-loss", LineChart)
        second = app.query_one("#chart-second", LineChart)

        def colours(chart: LineChart) -> dict[str, int]:
            return {c.label.split("/")[0]: c.color for c in chart._curves}

        await pilot.press("j", "j", "space")  # quickstart alone
        await until(pilot, lambda: set(colours(loss)) == {"quickstart"}, "quickstart charted")
        alone = colours(loss)["quickstart"]
        await pilot.press("k", "k", "space")  # input_bound beside it
        await until(pilot, lambda: len(colours(loss)) == 2, "both charted")
        assert colours(loss)["quickstart"] == alone  # it kept its colour
        assert colours(loss)["input_bound"] != alone
        for job, color in colours(second).items():
            assert colours(loss)[job] == color  # the same colour on the other chart


@pytest.mark.parametrize(("shown", "expected"), [
    ([["a"], ["b", "a"]], {"a": 0, "b": 1}),  # a keeps 0 when b comes
    ([["a"], ["b"], ["a", "b"]], {"a": 0, "b": 1}),  # each in turn, apart when together
    ([[f"j{i}"] for i in range(8)] + [["j0", "j7"]], {"j0": 0, "j7": 1}),  # j7 moves off j0's
    ([[f"j{i}" for i in range(8)]], {**{f"j{i}": i for i in range(7)}, "j7": 0}),  # 7 colours
])
def test_the_colour_book(shown: list[list[str]], expected: dict[str, int]) -> None:
    from distmon.render.braille import ColourBook

    book = ColourBook()
    for names in shown:
        got = book.colors(names)
    assert got == expected
