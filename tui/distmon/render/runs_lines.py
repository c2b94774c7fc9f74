"""The runs table's lines as pure functions: its columns for a width, one row's cells, and the
line they make. The widget (distmon.widgets.runs) calls these only for the rows in view.

Every cell is a rich Text built from an escaped string, never markup: a name or an hparam
value such as "[red]x" shows as written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.text import Text

from distcore.textsafe import ELLIPSIS, elide, terminal_text
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
    "hung": "bold red", "unreadable": "bold yellow",
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


def elided_names(names: Iterable[str], width: int) -> dict[str, str]:
    """Each name within `width` characters, elided in the middle (`elide`); where two would
    then read alike (a sweep's names often differ only in the middle), each keeps its start and
    the part around where it departs from the others instead, and any still alike a number."""
    out = {name: elide(name, width) for name in names}
    for group in _alike(out):
        same_length = len({len(n) for n in group}) == 1
        for name in group:
            out[name] = _around_difference(name, group, width, same_length)
    for group in _alike(out):
        for number, name in enumerate(group[1:], start=2):
            tag = f"#{number}"
            out[name] = elide(name, max(width - len(tag), 1)) + tag
    return out


class FittedNames:
    """`elided_names` of the rows' names for the name column's width, worked out again only
    when the rows or the width changed (once per refresh that changed them, never per line)."""

    def __init__(self) -> None:
        self._key: tuple[object, int] | None = None
        self._names: dict[str, str] = {}

    def shown(self, items: Sequence[Entry | Header], width: int, item: Entry | Header) -> str:
        if self._key is None or self._key[0] is not items or self._key[1] != width:
            names = (shown_name(i) for i in items if not isinstance(i, Header))
            self._key, self._names = (items, width), elided_names(names, width)
        name = shown_name(item)
        return self._names.get(name) or elide(name, width)


def _alike(shown: dict[str, str]) -> list[list[str]]:
    by_text: dict[str, list[str]] = {}
    for name, text in shown.items():
        by_text.setdefault(text, []).append(name)
    return [group for group in by_text.values() if len(group) > 1]


def _around_difference(name: str, group: Sequence[str], width: int, same_length: bool) -> str:
    """`name` as its start, an ellipsis, and a window holding the first character where it
    departs from the group member most like it (an ellipsis after it where cut). The window
    sits at that place in every name of the group, so the names read apart there."""
    at = max(_common_prefix(name, other) for other in group if other is not name)
    head = max(1, width // 4)
    room = width - head - 1
    if width < 5 or at < head or at >= len(name):
        return elide(name, width)
    if same_length and len(name) - at <= room:  # the end holds the difference
        return name[:head] + ELLIPSIS + name[len(name) - room:]
    room -= 1  # the window's own closing ellipsis
    start = max(head, at - room // 2)
    window = name[start : start + room]
    return name[:head] + ELLIPSIS + window + (ELLIPSIS if start + room < len(name) else "")


def _common_prefix(a: str, b: str) -> int:
    """How many characters `a` and `b` share at their start."""
    pairs = enumerate(zip(a, b, strict=False))
    return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))


def row_cells(
    item: Entry | Header, selected: bool, compare: Sequence[str], name: int,
    shown: str | None = None,
) -> list[Text]:
    """One row's cells, in the order of `table_columns`; `name`: the name column's width;
    `shown`: the name as `elided_names` fitted it (else elided alone)."""
    if isinstance(item, Header):
        blanks = [Text() for _ in range(len(FIXED_KEYS) - 2 + len(compare))]
        return [Text(), Text(item.label, style="bold"), *blanks]
    row = item.row
    mark = Text(row.mark, style=STATUS_STYLE.get(row.status, ""))
    mark.append("◆" if selected else " ", style="bold magenta")
    # The name comes from the logdir: control characters escaped, 10,000 characters elided,
    # then to the column's width in the middle (a sweep's names differ at their ends).
    if shown is None:
        shown = elide(shown_name(item), name)
    name_cell = Text(shown, style="bold magenta" if selected else "")
    extra = [Text(cell_text(item.compare.get(c), c)) for c in compare]
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
