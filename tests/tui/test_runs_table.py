"""The runs table is virtual (a sweep has thousands of jobs): it builds the lines of the rows in
view, whatever the number of jobs, and keeps them until a row changes. Pilot tests on the real
app and job index over a fixed run source; what they read is what the user sees (the drawn
lines, the cursor)."""

from __future__ import annotations

import dataclasses
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from distcore.jobs.snapshots import Job
from distcore.table import CompareRow
from distcore.textsafe import elide, terminal_text
from distmon.formats import fitted
from distmon.render.compare_view import Entry
from distmon.render.runs_lines import (
    TableColumn,
    frozen_width,
    line_text,
    name_width,
    reveal_scroll,
    row_cells,
    shown_name,
    table_columns,
)
from distmon.render.view_model import NAME_LIMIT
from distmon.widgets.runs import RunsTable
from tests.kit.wait import until
from tests.tui.conftest import MakeApp, ready
from tests.tui.fixed import FixedRuns, keras_job
from tests.tui.test_table_keys import laid_out, screen_line

JOBS = 1_000


def in_view(table: RunsTable) -> int:
    """Rows the table shows at once, below its header."""
    return table.scrollable_content_region.height - 1


def drawn_jobs(table: RunsTable) -> list[str]:
    return [screen_line(table, y).split()[1] for y in range(1, in_view(table) + 1)]


async def test_only_the_rows_in_view_are_built_and_kept(make_app: MakeApp) -> None:
    store = FixedRuns([r for i in range(JOBS) for r in keras_job(f"job{i:04}", 3)])
    app = make_app(store=store)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        table = app.query_one(RunsTable)
        await until(pilot, lambda: table.row_count == JOBS and laid_out(table), "all, laid out")
        await pilot.pause()
        page = in_view(table)
        assert 10 < page < 60 and table.renders <= 3 * page  # a few layouts, never 1,000 rows
        assert table.virtual_size.height == JOBS + 1
        arranged = app.dashboard.arranged
        assert arranged is not None  # the figures formatted for the jobs in view only
        assert sum("row" in vars(e) for e in arranged.items) <= 3 * page
        top = drawn_jobs(table)
        assert top == list(table.row_keys[:page]) and table.current_key == top[0]
        before = table.renders
        await pilot.press("ctrl+end")  # to the last job: that screen's rows are built
        await pilot.pause()
        assert table.current_key == table.row_keys[-1] == drawn_jobs(table)[-1]
        assert 0 < table.renders - before <= page + 1
        before = table.renders
        await pilot.press("ctrl+home")  # back: those lines were kept
        await pilot.pause()
        assert table.current_key == drawn_jobs(table)[0] == table.row_keys[0]
        assert table.renders == before


async def test_paging_and_clicks_move_the_cursor_as_datatable_did(make_app: MakeApp) -> None:
    runs = [r for i in range(200) for r in keras_job(f"job{i:04}", 3)]
    store = FixedRuns(runs)
    app = make_app(store=store)
    main = app.dashboard
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        table = app.query_one(RunsTable)
        await until(pilot, lambda: table.row_count == 200 and laid_out(table), "all, laid out")
        page = in_view(table)
        await pilot.press("pagedown")
        assert table.cursor_row == page and table.scroll_y == page
        await pilot.pause()
        assert drawn_jobs(table)[0] == table.current_key
        await pilot.press("pageup", "j", "j", "k")
        assert table.cursor_row == 1 and table.scroll_y == 0
        await pilot.click(RunsTable, offset=(10, 5))  # border, header, then rows 0, 1, 2
        assert table.cursor_row == 3

        def background(y: int) -> object:
            style = next(iter(table.render_line(y))).style
            return style.bgcolor if style is not None else None

        await pilot.hover(RunsTable, offset=(10, 7))  # row 5: lit, unlike row 6 and the cursor
        assert background(1 + 5) not in (background(1 + 6), background(1 + 3))
        await pilot.press("j", "k")  # the keys drive: the hover goes
        assert background(1 + 5) == background(1 + 6)
        await until(pilot, lambda: main.state.cursor_job == table.row_keys[3], "the charts' job")
        table.scroll_to(y=100, animate=False)  # as the wheel scrolls: the cursor stays put
        changed = keras_job("job0110", 3, status="idle")  # a job in view changes
        store.replace([r for r in runs if not r.name.startswith("job0110/")] + changed)
        status = lambda: {r.key: r.status for r in table.job_rows}["job0110"]  # noqa: E731
        await until(pilot, lambda: status() == "idle", "the changed job")
        await pilot.pause()
        assert table.scroll_y == 100 and table.cursor_row == 3  # no jump back to the cursor
        assert "○" in screen_line(table, 110 - 100 + 1)  # its line drawn anew, where it is


@settings(max_examples=200, deadline=None)
@given(
    name=st.text(min_size=1, max_size=120),
    value=st.one_of(st.text(max_size=40), st.floats(allow_nan=True)),
    width=st.integers(0, 300),
    selected=st.booleans(),
)
def test_any_name_and_value_make_one_printable_line_of_the_columns_width(
    name: str, value: str | float, width: int, selected: bool
) -> None:
    """Names from logdirs and hparam values as written: escaped, never markup, each cut to its
    column, and the line exactly as wide as the columns."""
    job = Job(name, None, {}, "live", None, (), ())
    compare = CompareRow(name, "live", None, {"opt": value}, {})
    entry = Entry(job, terminal_text(name, NAME_LIMIT), compare)
    columns = table_columns(("opt",), name_width(cell_len(shown_name(entry)), width))
    line = line_text(row_cells(entry, selected, ("opt",), columns[1].width), columns)
    assert line.cell_len == sum(c.render_width for c in columns)
    assert not {unicodedata.category(c) for c in line.plain} & {"Cc", "Cs"}  # no controls
    shown = elide(shown_name(entry), columns[1].width)
    if cell_len(shown) <= columns[1].width:  # else wide characters: cut by cells, with "…"
        assert shown in line.plain
    if cell_len(shown_name(entry)) <= width - 60:  # room enough: the whole name shows
        assert shown_name(entry) in line.plain


def _wide_sweep() -> FixedRuns:
    """Three jobs with more hparams than a screen holds."""
    runs = []
    for i in range(3):
        for snap in keras_job(f"sweep-job-{i}", 3):
            train = snap.name.endswith("/train")
            hparams = {f"h{k:02}": 0.1 * (i + 1) + k for k in range(30)} if train else {}
            runs.append(dataclasses.replace(snap, hparams=hparams))
    return FixedRuns(runs)


async def test_a_sort_column_off_screen_scrolls_into_view_beside_the_frozen_names(
    make_app: MakeApp,
) -> None:
    app = make_app(store=_wide_sweep())
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        table = app.query_one(RunsTable)
        await until(pilot, lambda: "c:h29" in table.columns and laid_out(table), "the hparams")
        assert "h29" not in screen_line(table, 0)  # off to the right
        names = [screen_line(table, y).split()[1] for y in range(1, 4)]
        assert all(n.startswith("sweep") for n in names)
        app.dashboard.view = dataclasses.replace(app.dashboard.view, sort="h29")
        await until(pilot, lambda: "h29" in screen_line(table, 0), "the sort column in view")
        assert table.scroll_x > 0
        # Scrolled right, each row still names its job (the sort moved no row: h29 rises).
        assert [screen_line(table, y).split()[1] for y in range(1, 4)] == names
        assert screen_line(table, 0).split()[0] == "job"
        table.scroll_to(x=0, animate=False)
        await until(pilot, lambda: table.scroll_x == 0, "back to the left")
        app.dashboard.view = dataclasses.replace(app.dashboard.view, sort="step")  # no jump
        await pilot.pause()
        assert table.scroll_x == 0


@pytest.mark.parametrize(("text", "width", "shown"), [
    ("0.1", 6, "0.1"),  # fits: as it is
    ("0.1000000015", 6, "0.1"),  # a float32 hparam: digits go, the value stays
    ("-1.235e-05", 9, "-1.235e-5"),  # the exponent written short keeps a digit
    ("-1.235e-05", 8, "-1.24e-5"),
    ("-1.235e-05", 6, "-1e-05"),
    ("123456789", 6, "1.23e8"),
    ("123456789", 4, "1e8"),
    ("0.02", 3, "…"),  # no form fits: an ellipsis, never `0.0`
    ("adam_with_warmup", 6, "adam_with_warmup"),  # text is text
    ("1_000_000", 6, "1_000_000"),
    ("nan", 6, "nan"),
])
def test_numbers_lose_digits_not_their_value_to_fit(text: str, width: int, shown: str) -> None:
    assert fitted(text, width) == shown


def test_a_narrow_hparam_column_keeps_its_numbers_readable() -> None:
    job = Job("j", None, {}, "live", None, (), ())
    entry = Entry(job, "j", CompareRow("j", "live", None, {"dropout": "0.1000000015"}, {}))
    columns = table_columns(("dropout",), 8)
    line = line_text(row_cells(entry, False, ("dropout",), 8), columns)
    assert line.plain.split()[-1] == "0.1"


# mark 1+2, job 10+2 (frozen: 15 cells), then three columns of 8+2 each.
SCROLL_COLUMNS = (TableColumn("mark", "", 1), TableColumn("job", "job", 10),
                  TableColumn("c:a", "a", 8), TableColumn("c:b", "b", 8),
                  TableColumn("c:c", "c", 8))


@pytest.mark.parametrize(("key", "room", "scroll_x", "expected"), [
    ("c:a", 20, 0, None),  # in view already
    ("c:b", 20, 0, None),  # ends exactly at the edge
    ("c:c", 20, 0, 10),  # off to the right: scrolled until it ends at the edge
    ("c:a", 20, 10, 0),  # scrolled past on the left: back to first after the names
    ("c:b", 5, 0, 15),  # wider than the room: its end shows
    ("job", 20, 10, None),  # frozen: always on screen
    ("mark", 20, 10, None),
    ("c:missing", 20, 0, None),
])
def test_reveal_scroll(key: str, room: int, scroll_x: int, expected: int | None) -> None:
    assert frozen_width(SCROLL_COLUMNS) == 15
    assert reveal_scroll(SCROLL_COLUMNS, key, room, scroll_x) == expected


@pytest.mark.parametrize(("column", "value", "shown"), [
    ("goodput", 0.7912, "79%"),
    ("perf/input_wait_fraction", 0.0934, "9%"),
    ("perf/input_wait_fraction.max", 0.5, "50%"),
    ("perf/mfu", 0.042, "4.2%"),
    ("lr", 0.7912, "0.7912"),
])
def test_a_share_column_reads_as_a_share(column: str, value: float, shown: str) -> None:
    job = Job("j", None, {}, "live", None, (), ())
    entry = Entry(job, "j", CompareRow("j", "live", None, {}, {column: value}))
    line = line_text(row_cells(entry, False, (column,), 8), table_columns((column,), 8))
    assert line.plain.split()[-1] == shown


def _row(name: str, **metrics: float) -> CompareRow:
    return CompareRow(name, "live", None, {}, metrics)


@pytest.mark.parametrize(("rows", "expr", "column"), [
    ([_row("a", epoch_loss=0.2), _row("b", epoch_loss=0.4)], "loss<0.3", "epoch_loss"),
    ([_row("a", epoch_accuracy=0.9)], "acc>0.5", "epoch_accuracy"),
    ([_row("a", **{"perf/input_wait_fraction": 0.7})], "wait>0.5", "perf/input_wait_fraction"),
    ([_row("a", loss=0.2)], "loss<0.3", "loss"),  # a column of that name is itself
])
def test_the_runs_tables_headers_name_their_columns(
    rows: list[CompareRow], expr: str, column: str
) -> None:
    from distcore.table import build_table, parse_filter, resolve_columns
    from distmon.render.compare_view import header_aliases

    table = build_table(rows)
    (condition,) = resolve_columns(parse_filter(expr), table.columns, header_aliases(table.rows))
    assert condition.column == column


def test_a_header_two_jobs_read_two_ways_is_no_alias() -> None:
    from distcore.errors import DistmonError
    from distcore.table import build_table, parse_filter, resolve_columns
    from distmon.render.compare_view import header_aliases

    table = build_table([_row("a", epoch_loss=0.2), _row("b", batch_loss=0.4)])
    with pytest.raises(DistmonError, match=r"no column 'loss' \(columns: .*batch_loss"):
        resolve_columns(parse_filter("loss<1"), table.columns, header_aliases(table.rows))


@pytest.mark.parametrize(("names", "width", "shown"), [
    (["exp_lr0.001_bs32_long_common_suffix_seed1", "exp_lr0.010_bs32_long_common_suffix_seed1"],
     12, ["exp…0.001_b…", "exp…0.010_b…"]),
    (["sweep_a_very_long_middle_part_run1", "sweep_a_very_long_middle_part_run2"],
     10, ["sweep_…un1", "sweep_…un2"]),  # apart at their ends already: elided as ever
    (["short", "exp_lr0.001_bs32_long"], 12, ["short", "exp_lr0.…ong"]),
])
def test_names_shortened_alike_keep_what_tells_them_apart(
    names: list[str], width: int, shown: list[str]
) -> None:
    from distmon.render.runs_lines import elided_names

    assert list(elided_names(names, width).values()) == shown


@given(
    st.lists(st.text(alphabet="ab_.0123", min_size=1, max_size=40), unique=True, max_size=12),
    st.integers(min_value=5, max_value=30),
)
def test_distinct_names_stay_distinct_in_any_width(names: list[str], width: int) -> None:
    from distmon.render.runs_lines import elided_names

    shown = elided_names(names, width)
    assert len(set(shown.values())) == len(names)
    assert all(len(text) <= width for text in shown.values())


async def test_long_names_alike_in_the_middle_read_apart_on_screen(make_app: MakeApp) -> None:
    names = [f"sweep_with_a_long_common_start_{lr}_and_a_long_common_end_seed1"
             for lr in ("lr1", "lr2")]
    app = make_app(store=FixedRuns([r for n in names for r in keras_job(n, 3)]))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        table = app.query_one(RunsTable)
        await until(pilot, lambda: table.row_count == 2 and laid_out(table), "both, laid out")
        await pilot.pause()
        shown = [screen_line(table, y).split()[1] for y in (1, 2)]
        assert shown[0] != shown[1] and "lr1" in shown[0] and "lr2" in shown[1], shown
