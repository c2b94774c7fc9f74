"""The runs table's lines as pure functions: its columns for a width, one row's cells, and the
line they make. The widget (distmon.widgets.runs) calls these only for the rows in view.

Every cell is a rich Text built from an escaped string, never markup: a name or an hparam
value such as "[red]x" shows as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from distcore.textsafe import elide, terminal_text
from distmon.formats import fitted
from distmon.render.compare_view import Entry, Header, cell_text
from distmon.render.view_model import ROW_COLUMNS

# Fixed widths for the columns that change in place; the name takes what the width leaves
# (the input-wait and MFU columns stay in view from 120 columns on); comparison columns follow,
# scrolled to.
COLUMN_WIDTHS = {"": 2, "step": 8, "loss": 9, "acc": 6, "ex/s": 7, "wait": 4, "mfu": 4}
NAME_LIMIT = 80  # characters of a job's name in the table
MIN_NAME = 8
HEADER_LIMIT = 16  # characters of a comparison column's header
PADDING = 1  # blank cells on each side of every cell
SCROLLBAR = 1  # the vertical scrollbar's width (distmon.tcss)
STATUS_STYLE = {
    "live": "green", "idle": "yellow", "gone": "red", "running": "green", "finished": "cyan",
    "failed": "bold red", "diverged": "bold red", "died": "bold red", "stopped": "yellow",
    "hung": "bold red",
}  # fmt: skip
FIXED_KEYS = ("mark", *ROW_COLUMNS[1:])


@dataclass(frozen=True)
class TableColumn:
    key: str  # "mark", "job", "step", ... then "c:NAME" for a comparison column
    label: str  # escaped
    width: int  # of its text, padding not counted

    @property
    def render_width(self) -> int:
        """The cells it takes on screen, padding included."""
        return self.width + 2 * PADDING


def shown_name(item: Entry | Header) -> str:
    """What the name column shows: a group's label, or the job's name escaped and elided."""
    if isinstance(item, Header):
        return item.label
    return terminal_text(item.job.name, NAME_LIMIT)


def name_width(longest: int, width: int) -> int:
    """The name column's width: the longest name, or what `width` leaves after the others."""
    longest = max(longest, 4)
    if width <= 0:  # before the layout
        return min(longest, NAME_LIMIT)
    others = sum(w + 2 * PADDING for w in COLUMN_WIDTHS.values())
    room = width - SCROLLBAR - others - 2 * PADDING
    return max(MIN_NAME, min(longest, room))


def table_columns(compare: Sequence[str], name: int) -> tuple[TableColumn, ...]:
    fixed = [
        TableColumn(key, label, name if key == "job" else COLUMN_WIDTHS[label])
        for label, key in zip(ROW_COLUMNS, FIXED_KEYS, strict=True)
    ]
    extra = []
    for column in compare:
        label = terminal_text(column, HEADER_LIMIT)
        extra.append(TableColumn(f"c:{column}", label, max(len(label), 6)))
    return (*fixed, *extra)


def signature(item: Entry | Header, selected: bool) -> object:
    """What a row's line is made from: the same signature, the same line."""
    if isinstance(item, Header):
        return item.label
    return (item.row, item.compare, selected)


def row_cells(
    item: Entry | Header, selected: bool, compare: Sequence[str], name: int
) -> list[Text]:
    """One row's cells, in the order of `table_columns`; `name`: the name column's width."""
    if isinstance(item, Header):
        blanks = [Text() for _ in range(len(FIXED_KEYS) - 2 + len(compare))]
        return [Text(), Text(item.label, style="bold"), *blanks]
    row = item.row
    mark = Text(row.mark, style=STATUS_STYLE.get(row.status, ""))
    mark.append("◆" if selected else " ", style="bold magenta")
    # The name comes from the logdir: control characters escaped, 10,000 characters elided,
    # then to the column's width in the middle (a sweep's names differ at their ends).
    shown = elide(shown_name(item), name)
    name_cell = Text(shown, style="bold magenta" if selected else "")
    extra = [Text(cell_text(item.compare.get(c))) for c in compare]
    return [mark, name_cell, *(Text(c) for c in row.cells()[2:]), *extra]


def line_text(cells: Sequence[Text], columns: Sequence[TableColumn]) -> Text:
    """The cells side by side, each cut to its column's width (an ellipsis where cut) and
    padded: one line of the table, before the cursor's style and the horizontal scroll."""
    line = Text(no_wrap=True, end="")
    pad = " " * PADDING
    for cell, column in zip(cells, columns, strict=True):
        plain = cell.plain
        short = fitted(plain, column.width)
        fitted_cell = cell.copy() if short == plain else Text(short, style=cell.style)
        fitted_cell.truncate(column.width, overflow="ellipsis", pad=True)
        line.append(pad)
        line.append_text(fitted_cell)
        line.append(pad)
    return line


def header_cells(columns: Sequence[TableColumn]) -> list[Text]:
    return [Text(c.label) for c in columns]


def frozen_width(columns: Sequence[TableColumn]) -> int:
    """Cells of the columns that never scroll sideways: up to and with the job's name."""
    width = 0
    for column in columns:
        width += column.render_width
        if column.key == "job":
            return width
    return 0


def reveal_scroll(columns: Sequence[TableColumn], key: str, room: int, scroll_x: int) -> int | None:
    """The sideways scroll that brings column `key` into the `room` cells beside the frozen
    names (the least move: it lands first or last after them), or None where no move is
    needed (already in view, frozen, or no such column)."""
    frozen, start = frozen_width(columns), 0
    for column in columns:
        if column.key == key:
            break
        start += column.render_width
    else:
        return None
    end = start + column.render_width
    if start < frozen:
        return None
    if start - frozen < scroll_x:
        return start - frozen
    if end - frozen > scroll_x + room:
        return end - frozen - room
    return None
