"""Pilot tests of the comparison table's keys (sort, reverse, filter expression, group, top-N
overlay, columns) on a real watched logdir: tensorboardX's add_hparams and distagent's run.json
-> LogdirWatcher -> RunStore -> JobIndex -> app. Every wait is for the state asserted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, SelectionList

from distmon.app import DistmonApp
from distmon.options import Options
from distmon.widgets.charts import LineChart
from distmon.widgets.runs import RunsTable
from distmon.widgets.table_screens import ColumnsChooser
from tests.kit.wait import until
from tests.tui.conftest import MakeApp, choose, ready
from tests.tui.fixed import FixedRuns, keras_job

TIMEOUT = 60.0  # generous: a loaded 2-core machine
SWEEP = {"s1": (0.1, "sgd"), "s2": (0.01, "adam"), "s3": (0.001, "adam"), "s4": (0.03, "sgd")}


def write_sweep(root: Path) -> Path:
    from tensorboardX import SummaryWriter

    from distagent.config import config_to_dict, load_config
    from distagent.plan import make_plan
    from distagent.train.rundir import RunRecord

    for name, (lr, opt) in SWEEP.items():
        with SummaryWriter(str(root / name)) as w:
            for step in range(5):
                w.add_scalar("loss", 1.0 / (step + 1) + lr, step)
            w.add_hparams({"lr": lr, "optimizer": opt}, {"hparam/best": 1.0 - lr})
    cfg = load_config(Path(__file__).parents[2] / "sample_configs" / "adam_sqrt.toml")
    plan = make_plan(cfg, replicas=4, devices=["/cpu:0"] * 4, num_examples=4096)
    with SummaryWriter(str(root / "agent" / "train")) as w:
        for step in range(5):
            w.add_scalar("loss", 0.5 / (step + 1), step)
    record = {"status": "finished", "config": config_to_dict(cfg), "plan": plan.to_json()}
    RunRecord(root / "agent", record).update()
    return root


def keys(app: DistmonApp) -> list[str]:
    return list(app.query_one(RunsTable).row_keys)


def screen_line(table: RunsTable, y: int) -> str:
    """Line `y` of the table as drawn (0: the header)."""
    return table.render_line(y).text


def laid_out(table: RunsTable) -> bool:
    """Built for the width it has (the first build can come before the layout)."""
    return table.size.width > 0 and table._built_width == table.size.width


def app_over(logdir: Path) -> DistmonApp:
    return DistmonApp(Options(logdirs=(logdir,), refresh=0.2, no_gpu=True))


async def loaded(pilot: Any, app: DistmonApp) -> None:
    """Every job listed with its hparams (the sub-runs read too)."""

    def ready_() -> bool:
        arranged = app.dashboard.arranged
        return keys(app) == ["agent", *SWEEP] and arranged is not None and "lr" in arranged.hparams

    await until(pilot, ready_, "the sweep's jobs and hparams")


async def pick(pilot: Any, app: DistmonApp, key: str, option: str) -> None:
    """`s` (sort by) or `g` (group by) and a column, from the command palette."""
    prefix = {"s": "sort by ", "g": "group by "}[key]
    await choose(pilot, app, key, "group by nothing (one list)" if option == "(none)"
                 else prefix + option)


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    return write_sweep(tmp_path / "logs")


async def test_s_sorts_by_a_column_and_shift_s_reverses(sweep: Path) -> None:
    app = app_over(sweep)
    async with app.run_test(size=(160, 48)) as pilot:
        await loaded(pilot, app)
        await pick(pilot, app, "s", "lr")
        by_lr = ["s3", "agent", "s2", "s4", "s1"]  # the agent's plan: lr 0.002
        await until(pilot, lambda: keys(app) == by_lr, "the jobs by lr")
        assert "sort lr" in str(app.query_one(RunsTable).border_title)
        await pilot.press("S")
        await until(pilot, lambda: keys(app) == by_lr[::-1], "the jobs by lr, reversed")
        await pick(pilot, app, "s", "optimizer")  # strings as strings; reverse kept
        await until(pilot, lambda: keys(app) == ["s1", "s4", "agent", "s2", "s3"], "by optimizer")


async def test_f_filters_by_expression_beside_the_name_filter(sweep: Path) -> None:
    app = app_over(sweep)
    main = app.dashboard
    async with app.run_test(size=(160, 48)) as pilot:
        await loaded(pilot, app)
        await pilot.press("f")
        box = app.query_one("#expr", Input)
        assert box.has_focus
        await pilot.press(*"optimizer=adam,lr<0.005")
        await until(pilot, lambda: keys(app) == ["agent", "s3"], "the expression's jobs")
        await pilot.press("enter")
        assert app.query_one(RunsTable).has_focus and box.display
        await pilot.press("slash", *"s", "enter")  # and the regex on names, both apply
        await until(pilot, lambda: keys(app) == ["s3"], "both filters")
        await pilot.press("f", "backspace", "backspace", "backspace", "backspace", "<")
        status = app.query_one("#status")
        await until(pilot, lambda: "bad filter expression" in str(status.render()), "its error")
        assert keys(app) == ["s1", "s2", "s3", "s4"]  # meanwhile only the name filter applies
        await pilot.press("escape")
        await until(pilot, lambda: main.view.expr == "" and not box.has_focus, "expression cleared")


async def test_g_groups_by_an_hparam_and_o_overlays_the_top_n(sweep: Path) -> None:
    app = app_over(sweep)
    async with app.run_test(size=(160, 48)) as pilot:
        await loaded(pilot, app)
        await pick(pilot, app, "s", "loss")
        await pick(pilot, app, "g", "optimizer")
        adam, sgd = ["\x00group\x000", "agent", "s3", "s2"], ["\x00group\x001", "s4", "s1"]
        await until(pilot, lambda: keys(app) == adam + sgd, "adam (run.json's too), then sgd")
        await pilot.press("o")  # the top 3 by loss (lowest first) on the charts
        chart = app.query_one("#chart-loss", LineChart)
        await until(pilot, lambda: [c.label for c in chart._curves] == ["agent/train", "s3", "s2"],
                    "the top 3 overlaid")  # fmt: skip
        await pick(pilot, app, "g", "(none)")
        await until(pilot, lambda: keys(app) == ["agent", "s3", "s2", "s4", "s1"], "ungrouped")
        for _ in range(3):  # 5, 10, then off: the cursor's job alone again
            await pilot.press("o")
        await until(pilot, lambda: len(chart._curves) == 1, "the overlay off")


async def test_c_chooses_the_columns(sweep: Path) -> None:
    app = app_over(sweep)
    async with app.run_test(size=(160, 48)) as pilot:
        await loaded(pilot, app)
        table = app.query_one(RunsTable)
        shown = [c.label for c in table.columns.values()]
        assert {"lr", "optimizer", "lr_rule", "model", "loss"} <= set(shown)
        assert "loss.min" not in shown  # the best values: chosen with c
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ColumnsChooser), "the chooser")
        chooser = app.screen.query_one(SelectionList)
        chooser.deselect_all()
        chooser.select("loss.min")
        await pilot.press("escape")
        labels = lambda: [c.label for c in table.columns.values()][8:]  # noqa: E731
        await until(pilot, lambda: labels() == ["loss.min"], "only loss.min after the fixed ones")


async def test_tab_after_a_kept_filter_never_enters_it_and_q_quits(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot)
        await pilot.press("slash", *"quick", "enter")
        assert app.query_one("#filter", Input).display
        await pilot.press("tab", "tab", "tab")
        assert not isinstance(app.focused, Input)
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "q to quit")


@pytest.mark.parametrize("size", [(120, 36), (160, 48), (240, 60)])
async def test_the_input_wait_and_mfu_columns_stay_in_view(
    make_app: MakeApp, size: tuple[int, int]
) -> None:
    app = make_app([*keras_job("a" * 70, wait=0.3), *keras_job("b")])
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        table = app.query_one(RunsTable)
        await until(pilot, lambda: table.row_count == 2 and laid_out(table), "the rows, laid out")
        widths = [c.render_width for c in table.columns.values()]
        labels = [c.label for c in table.columns.values()]
        # Input wait from 120 columns on, MFU too from 160 (a narrow screen keeps the name).
        last = "mfu" if size[0] >= 160 else "wait"
        end = sum(widths[: labels.index(last) + 1])
        assert end <= table.scrollable_content_region.width, (widths, table.size)
        await pilot.pause()
        in_view = screen_line(table, 0)[: table.scrollable_content_region.width]
        assert in_view.rstrip().endswith(last), in_view  # the header as the user sees it



async def test_a_refresh_renders_only_the_rows_that_changed(make_app: MakeApp) -> None:
    runs = [r for i in range(300) for r in keras_job(f"job{i:03}")]
    store = FixedRuns(runs)
    app = make_app(store=store)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        table = app.query_one(RunsTable)
        await until(pilot, lambda: table.row_count == 300 and laid_out(table), "300, laid out")
        before = table.renders
        changed = keras_job("job007", status="idle")  # the store's files went quiet
        store.replace([r for r in runs if not r.name.startswith("job007/")] + changed)
        await until(pilot, lambda: table.renders > before, "the changed row")
        await pilot.pause()
        assert table.renders - before == 1


async def test_sort_and_filter_options_set_where_the_dashboard_starts(sweep: Path) -> None:
    options = Options(
        logdirs=(sweep,), refresh=0.2, no_gpu=True, sort="-lr", filter="optimizer=sgd"
    )
    app = DistmonApp(options)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: keys(app) == ["s1", "s4"], "the sgd jobs, largest lr first")
        assert app.query_one("#expr", Input).display and app.query_one(RunsTable).has_focus


async def test_the_screen_shows_the_rows_in_the_table_s_order(sweep: Path) -> None:
    """Sorted, reversed: the lines drawn are the rows in order, the cursor on its job."""
    app = app_over(sweep)
    async with app.run_test(size=(160, 48)) as pilot:
        await loaded(pilot, app)
        table = app.query_one(RunsTable)
        await pilot.press("j")  # the cursor on the second job: it stays on that job
        chosen = table.current_key
        await pick(pilot, app, "s", "lr")
        by_lr = ["s3", "agent", "s2", "s4", "s1"]
        for order in (by_lr, by_lr[::-1]):
            await until(pilot, lambda o=order: keys(app) == o, "the jobs in order")  # type: ignore[misc]
            await pilot.pause()
            names = [screen_line(table, 1 + i).split()[1] for i in range(table.row_count)]
            assert names == order
            assert table.current_key == chosen == order[table.cursor_row]
            await pilot.press("S")


async def test_a_filter_on_a_column_nobody_has_says_so(sweep: Path) -> None:
    """`wait > 0.5` (the runs table's header) on jobs that write no input wait: a line naming
    the columns there are, never a silent empty table."""
    app = app_over(sweep)
    async with app.run_test(size=(160, 48)) as pilot:
        await loaded(pilot, app)
        await pilot.press("f", *"wait > 0.5")
        status = app.query_one("#status")
        await until(pilot, lambda: "no column 'wait'" in str(status.render()), "its error")
        assert "columns: " in str(status.render())
        assert sorted(keys(app)) == ["agent", "s1", "s2", "s3", "s4"]  # nothing filtered away
