"""The runs table's built lines (distmon.widgets.runs draws them): kept per row, built again
only when a row's signature (its cells, its selection) changes, and cut to the view when
scrolled sideways. Also the longest shown name, measured once per name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.cells import cell_len
from rich.text import Text
from textual.strip import Strip

from distcore.textsafe import terminal_text
from distmon.render.compare_view import GROUP_KEY, Entry, Header
from distmon.render.runs_lines import (
    NAME_LIMIT,
    FittedNames,
    TableColumn,
    frozen_width,
    header_cells,
    line_text,
    row_cells,
    signature,
)

LINES_KEPT = 2_000  # built lines kept for rows scrolled past before the cache starts again


class RowLines:
    """The header's line and each row's, as Strips (`to_strip` renders a Text with the app's
    console), kept until the columns change (`clear`)."""

    def __init__(self, to_strip: Callable[[Text], Strip]) -> None:
        self._to_strip = to_strip
        self._lines: dict[str, tuple[object, Strip]] = {}  # key -> (signature, line)
        self._fitted = FittedNames()  # the names as the name column fits them
        self._header: Strip | None = None
        self.renders = 0  # rows whose line was built: for tests and the benchmark

    def clear(self) -> None:
        self._lines.clear()
        self._header = None

    def header(self, columns: Sequence[TableColumn]) -> Strip:
        if self._header is None:
            self._header = self._to_strip(line_text(header_cells(columns), columns))
        return self._header

    def row(
        self,
        items: Sequence[Entry | Header],
        row: int,
        key: str,
        selected: bool,
        compare: tuple[str, ...],
        columns: Sequence[TableColumn],
    ) -> Strip:
        """Row `row` (its key `key`) of `items`, under `columns`."""
        item = items[row]
        wanted = signature(item, selected)
        kept = self._lines.get(key)
        if kept is not None and (kept[0] is wanted or kept[0] == wanted):
            return kept[1]
        if len(self._lines) > LINES_KEPT:
            self._lines.clear()
        width = next(c.width for c in columns if c.key == "job")
        shown = self._fitted.shown(items, width, item)
        cells = row_cells(item, selected, compare, width, shown)
        line = self._to_strip(line_text(cells, columns))
        self._lines[key] = (wanted, line)
        self.renders += 1
        return line


def scrolled(line: Strip, columns: Sequence[TableColumn], scroll_x: int, width: int) -> Strip:
    """The line as scrolled sideways: the mark and the name stay, the columns after them move
    (DataTable's fixed columns), so a row scrolled right still says whose it is."""
    frozen = frozen_width(columns)
    if scroll_x <= 0 or frozen >= width:
        return line.crop_extend(scroll_x, scroll_x + width, None)
    start = frozen + scroll_x
    moving = line.crop_extend(start, start + width - frozen, None)
    return Strip.join([line.crop_extend(0, frozen, None), moving])


class NameLengths:
    """Each row's shown name's length, measured once per name."""

    def __init__(self) -> None:
        self._lengths: dict[str, int] = {}

    def longest(self, keys: Sequence[str], items: Sequence[Entry | Header]) -> int:
        """The longest name shown (group labels too, when grouped)."""
        lengths = self._lengths
        if len(lengths) > 2 * len(keys) + 1000:  # jobs gone long since: forget them
            lengths.clear()
        for key in set(keys).difference(lengths):
            lengths[key] = cell_len(terminal_text(key, NAME_LIMIT))  # as shown_name shows it
        if keys and keys[0].startswith(GROUP_KEY):
            return max(
                cell_len(i.label) if isinstance(i, Header) else lengths[i.job.name]
                for i in items
            )
        return max(map(lengths.__getitem__, keys), default=0)
