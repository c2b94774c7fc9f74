"""The runs list: one row per job, then its comparison columns (hparams and metrics); space
selects jobs to overlay, enter focuses one.

Virtual (Textual's Line API, as its own DataTable and toolong's log view draw): `show` keeps
the arranged rows as they come, and `render_line` builds the line of a row only when that row
is on screen, kept per row and built again only when the row's signature (its cells, its
selection) changes. Filling or reordering 10,000 jobs therefore costs the UI thread the rows
in view, not the rows there are; the header stays on the first line and scrolls sideways with
the rows.

The cursor stays on the first row, whatever job a sweep's first read puts there, until the
user moves it (a key, a click) or acts on its job; from then on it follows that job.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from distmon import keymaps
from distmon.decoder_note import decoder_help
from distmon.render.compare_view import Arranged, Entry, Header
from distmon.render.runs_lines import (
    TableColumn,
    frozen_width,
    name_width,
    reveal_scroll,
    table_columns,
)
from distmon.render.view_model import JobRow
from distmon.widgets.row_lines import NameLengths, RowLines, scrolled

HEADER = 1  # lines of the header, above the rows


class RunsTable(ScrollView, can_focus=True):
    HELP = """\
**The runs.** `j`/`k` or the arrows move, `space` selects a job to overlay on the charts,
`enter` focuses one (its curves alone, and its plan from run.json); `tab` goes to the next
panel. `ctrl+p` searches every choice: a tag, a sort or group column, a column to show.

Jobs: ● live · ○ idle · ✕ gone · ◆ selected.
distagent (run.json): ▶ running · ✓ finished · ✖ failed or diverged · ■ stopped ·
? unreadable (its alert says why).
""" + decoder_help()  # the process's decoder is fixed when it starts
    BINDINGS: ClassVar[list[BindingType]] = keymaps.RUNS_TABLE
    COMPONENT_CLASSES = {  # noqa: RUF012
        "runs-table--header", "runs-table--cursor", "runs-table--hover",
    }  # fmt: skip
    # DataTable's look: the cursor row in the block cursor's colours, brighter with the focus.
    DEFAULT_CSS = """
    RunsTable { background: $surface; color: $foreground; }
    RunsTable:focus { background-tint: $foreground 5%; }
    RunsTable > .runs-table--header { text-style: bold; background: $panel; color: $foreground; }
    RunsTable:focus > .runs-table--header { background-tint: $foreground 5%; }
    RunsTable > .runs-table--cursor {
        background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground;
        text-style: $block-cursor-blurred-text-style;
    }
    RunsTable > .runs-table--hover { background: $block-hover-background; }
    RunsTable:focus > .runs-table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    """

    @dataclass
    class ToggleSelect(Message):
        key: str

    @dataclass
    class FocusJob(Message):
        key: str

    @dataclass
    class RowHighlighted(Message):
        """The cursor is on another row (a key, or a row under it that changed)."""

        key: str

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._items: tuple[Entry | Header, ...] = ()
        self._keys: list[str] = []  # row keys in table order
        self._arranged: Arranged | None = None
        self._selected: frozenset[str] = frozenset()
        self._compare: tuple[str, ...] = ()  # the comparison columns
        self._columns: tuple[TableColumn, ...] = table_columns((), name_width(0, 0))
        self._names = NameLengths()
        self._longest = 0
        self._lines = RowLines(self._strip)
        self._cursor = 0
        # Set once the user moves the cursor (a key, a click) or acts on its job: until then it
        # stays on the first row while a sweep's first read inserts jobs above it.
        self._chosen = False
        self._hover: int | None = None  # the row under the mouse
        self._told: str | None = None  # the key last posted as highlighted
        self._built_width = -1  # the width the columns were laid out for
        # The widget's rich style under every line, and what it was made from (_base_style).
        self._base: tuple[tuple[int, ...], Style] | None = None
        self.style_builds = 0  # times it was made: for tests and the benchmark

    # --- what the dashboard and the tests read ------------------------------------------------

    @property
    def job_rows(self) -> tuple[JobRow, ...]:
        """The jobs' rows as shown, in table order (group headers left out)."""
        return tuple(i.row for i in self._items if isinstance(i, Entry))

    _rows = job_rows  # the name the dashboard's older tests read

    @property
    def row_keys(self) -> tuple[str, ...]:
        """Every row's key in table order, group headers' included."""
        return tuple(self._keys)

    @property
    def row_count(self) -> int:
        return len(self._keys)

    @property
    def columns(self) -> dict[str, TableColumn]:
        """The columns in order, by key ("c:NAME" for a comparison column)."""
        return {c.key: c for c in self._columns}

    @property
    def renders(self) -> int:
        """Rows whose line was built: for tests and the benchmark."""
        return self._lines.renders

    @property
    def cursor_row(self) -> int:
        return self._cursor

    @property
    def current_key(self) -> str | None:
        if 0 <= self._cursor < len(self._keys):
            return self._keys[self._cursor]
        return None

    # --- the rows ------------------------------------------------------------------------------

    def show(self, arranged: Arranged, selected: frozenset[str]) -> None:
        """Take the rows as arranged; lines are built when drawn, for the rows in view."""
        if arranged is self._arranged and selected == self._selected:
            return  # an idle refresh: nothing to compare
        current = self.current_key
        items = arranged.items
        self._arranged, self._items, self._selected = arranged, items, selected
        # One pass over the rows, inlined (a function call per row was most of its cost).
        self._keys = [i.key if isinstance(i, Header) else i.job.name for i in items]
        if arranged.columns != self._compare:
            self._compare = arranged.columns
            self._built_width = -1
        self._longest = self._names.longest(self._keys, self._items)
        self._lay_out()
        row = self._cursor  # where it is, when its job is gone
        if not self._chosen:
            row = 0  # the top of the list, whatever job lands there
        elif current is not None:
            with contextlib.suppress(ValueError):
                row = self._keys.index(current)  # the cursor stays on the job the user chose
        # Into view only when its job moved: a refresh keeps where the wheel scrolled to.
        self.move_cursor(row, scroll=row != self._cursor)
        self.refresh()

    def _lay_out(self) -> None:
        """The columns for this width; the lines again if they changed."""
        columns = table_columns(self._compare, name_width(self._longest, self.size.width))
        if columns != self._columns or self._built_width != self.size.width:
            self._columns, self._built_width = columns, self.size.width
            self._lines.clear()
        width = sum(c.render_width for c in self._columns)
        self.virtual_size = Size(width, len(self._keys) + HEADER)

    def on_resize(self, event: events.Resize) -> None:
        self._lay_out()
        self.refresh()

    # --- drawing: only the lines in view -----------------------------------------------------

    def notify_style_update(self) -> None:
        """Textual's signal that the CSS applied here changed (a theme, a stylesheet, :focus)."""
        self._base = None
        super().notify_style_update()

    def _base_style(self) -> Style:
        """`rich_style`, made again only when a style it is made from changed.

        `rich_style` walks every ancestor and blends their colours, most of a kept line's cost
        when it ran for each line drawn. The key is each ancestor's styles' update
        count, as Textual's own Widget.visual_style keys its cache, so that an inline style
        set from code (which Textual does not signal) makes it again too."""
        key = tuple(node.styles._cache_key for node in self.ancestors_with_self)
        if self._base is None or self._base[0] != key:
            self._base = (key, self.rich_style)
            self.style_builds += 1
        return self._base[1]

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        base = self._base_style()
        if y < HEADER:
            line = self._lines.header(self._columns)
            style = base + self.get_component_rich_style("runs-table--header")
        else:
            row = y - HEADER + scroll_y
            if row >= len(self._items):
                return Strip.blank(width, base)
            key = self._keys[row]
            line = self._lines.row(self._items, row, key, key in self._selected, self._compare,
                                   self._columns)  # fmt: skip
            style = base
            if row == self._cursor:
                style = base + self.get_component_rich_style("runs-table--cursor")
            elif row == self._hover:
                style = base + self.get_component_rich_style("runs-table--hover")
        # The style under the cells' own (DataTable's cursor too leaves a cell's colours).
        return scrolled(line, self._columns, scroll_x, width).apply_style(style)

    def _strip(self, text: Text) -> Strip:
        return Strip(list(text.render(self.app.console)), text.cell_len)

    def reveal_column(self, name: str) -> None:
        """Scroll sideways so that column `name` (a comparison column's name, or a fixed one's
        key) shows beside the frozen names: a sort by a column off screen brings it in."""
        key = f"c:{name}" if f"c:{name}" in self.columns else name
        room = self.scrollable_content_region.width - frozen_width(self._columns)
        left = reveal_scroll(self._columns, key, room, round(self.scroll_x))
        if left is not None:
            self.scroll_to(x=left, animate=False, force=True)

    # --- the cursor ----------------------------------------------------------------------------

    def move_cursor(self, row: int, *, scroll: bool = True) -> None:
        """The cursor to `row` (kept inside the table); the dashboard told of a new key."""
        row = max(0, min(row, len(self._keys) - 1))
        if row != self._cursor:
            self._refresh_row(self._cursor)
            self._cursor = row
            self._refresh_row(row)
        if scroll:
            self._scroll_to_cursor()
        key = self.current_key
        if key is not None and key != self._told:
            self._told = key
            self.post_message(self.RowHighlighted(key))

    def _move_by_user(self, row: int, *, scroll: bool = True) -> None:
        """A key or a click moved the cursor: from now on it follows the job it is on."""
        self._chosen = True
        self.move_cursor(row, scroll=scroll)

    def _refresh_row(self, row: int) -> None:
        self.refresh_line(row + HEADER)

    def _page(self) -> int:
        """Rows in view below the header."""
        return max(1, self.scrollable_content_region.height - HEADER)

    def _scroll_to_cursor(self) -> None:
        top, page = round(self.scroll_y), self._page()
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, force=True)
        elif self._cursor >= top + page:
            self.scroll_to(y=self._cursor - page + 1, animate=False, force=True)

    def action_cursor_down(self) -> None:
        self._set_hover(None)  # the keys drive: the mouse's faint row goes, as DataTable's
        self._move_by_user(self._cursor + 1)

    def action_cursor_up(self) -> None:
        self._set_hover(None)
        self._move_by_user(self._cursor - 1)

    def action_page_down(self) -> None:
        self._set_hover(None)
        self.scroll_to(y=self.scroll_y + self._page(), animate=False, force=True)
        self._move_by_user(self._cursor + self._page(), scroll=False)
        self._scroll_to_cursor()

    def action_page_up(self) -> None:
        self._set_hover(None)
        self.scroll_to(y=self.scroll_y - self._page(), animate=False, force=True)
        self._move_by_user(self._cursor - self._page(), scroll=False)
        self._scroll_to_cursor()

    def action_cursor_top(self) -> None:
        self._set_hover(None)
        self._move_by_user(0)

    def action_cursor_bottom(self) -> None:
        self._set_hover(None)
        self._move_by_user(len(self._keys) - 1)

    def action_scroll_home(self) -> None:
        """home and end scroll sideways, as DataTable's row cursor does."""
        self.scroll_to(x=0, animate=False)

    def action_scroll_end(self) -> None:
        self.scroll_to(x=self.max_scroll_x, animate=False)

    def _row_at(self, event: events.MouseEvent) -> int | None:
        """The row under the mouse (None: the header, or below the last row)."""
        offset = event.get_content_offset(self)
        if offset is None or offset.y < HEADER:
            return None
        row = offset.y - HEADER + round(self.scroll_y)
        return row if row < len(self._keys) else None

    def on_click(self, event: events.Click) -> None:
        """A click on a row moves the cursor there (the header's line: nothing)."""
        if (row := self._row_at(event)) is not None:
            self._move_by_user(row)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        """The row under the mouse lit faintly, as DataTable's hover cursor."""
        self._set_hover(self._row_at(event))

    def on_leave(self, event: events.Leave) -> None:
        self._set_hover(None)

    def _set_hover(self, row: int | None) -> None:
        if row != self._hover:
            for old in (self._hover, row):
                if old is not None:
                    self._refresh_row(old)
            self._hover = row

    # Selecting or focusing the job under the cursor chooses it too: a second space must not
    # land on whatever job a read put on the first row since.
    def action_toggle_select(self) -> None:
        if (key := self.current_key) is not None and not key.startswith("\x00"):
            self._chosen = True
            self.post_message(self.ToggleSelect(key))

    def action_focus_job(self) -> None:
        if (key := self.current_key) is not None and not key.startswith("\x00"):
            self._chosen = True
            self.post_message(self.FocusJob(key))


__all__ = ["RunsTable", "TableColumn"]
