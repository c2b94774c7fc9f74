"""The runs table keeps the widget's rich style under its lines (made once, not for every line
drawn) and makes it again when a style it comes from changes: the focus, the theme, an inline
style set from code on it or on an ancestor. Pilot tests on the real app; what they compare is
the style of the lines as drawn against the widget's style as Textual computes it now."""

from __future__ import annotations

from typing import Any

from rich.style import Style

from distmon.widgets.runs import RunsTable
from tests.kit.wait import until
from tests.tui.conftest import MakeApp, ready
from tests.tui.fixed import keras_job
from tests.tui.test_table_keys import laid_out

HEADER, CURSOR, OTHER = 0, 1, 2  # lines: the header, row 0 (the cursor's), row 1


def drawn(table: RunsTable, y: int) -> Style | None:
    """The style of line `y`'s first cell as drawn (its padding: no style of its own)."""
    return next(iter(table.render_line(y))).style


def wanted(table: RunsTable, y: int) -> Style:
    base = table.rich_style  # computed afresh from the styles as they are
    component = {HEADER: "runs-table--header", CURSOR: "runs-table--cursor"}.get(y)
    return base if component is None else base + table.get_component_rich_style(component)


def as_textual_computes(table: RunsTable) -> bool:
    return all(drawn(table, y) == wanted(table, y) for y in (HEADER, CURSOR, OTHER))


async def shown_anew(pilot: Any, table: RunsTable, before: Style | None, what: str) -> None:
    """Wait until the lines are drawn in the new style, then check every kind of line."""
    await until(pilot, lambda: drawn(table, OTHER) != before, what)
    assert as_textual_computes(table), what


async def test_the_style_is_made_once_and_again_when_its_styles_change(
    make_app: MakeApp,
) -> None:
    app = make_app([r for i in range(20) for r in keras_job(f"job{i:02}", 3)])
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        table = app.query_one(RunsTable)
        await until(pilot, lambda: table.row_count == 20 and laid_out(table), "20, laid out")
        await until(pilot, lambda: table.has_focus, "the table focused")
        await pilot.pause()
        assert as_textual_computes(table)
        builds = table.style_builds
        for _ in range(3):  # whole screens drawn again: the style kept
            for y in range(table.size.height):
                table.render_line(y)
        assert table.style_builds == builds

        before = drawn(table, OTHER)
        app.set_focus(None)  # :focus goes: its tint and the cursor's colours
        await shown_anew(pilot, table, before, "the blurred table's style")

        before = drawn(table, OTHER)
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await shown_anew(pilot, table, before, "the new theme's style")

        before = drawn(table, OTHER)
        table.styles.background = "darkred"  # inline, from code: Textual signals nothing
        await shown_anew(pilot, table, before, "its own inline background")

        before = drawn(table, OTHER)
        assert table.parent is not None
        table.parent.styles.text_style = "italic"  # an ancestor's, inherited
        await shown_anew(pilot, table, before, "the ancestor's text style")
        assert (style := drawn(table, OTHER)) is not None and style.italic
