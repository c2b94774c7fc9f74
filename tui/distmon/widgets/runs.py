"""The runs list: one row per job, then its comparison columns (hparams and metrics); space
selects jobs to overlay, enter focuses one.

Incremental: `show` adds the rows of new jobs, removes those of vanished ones, updates the
cells of the rows that changed and reorders the rest without re-rendering them (DataTable's
own sort, keyed on each row's position), so a refresh costs what changed. Only a change of
the columns (or of the table's width) rebuilds the whole table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual._two_way_dict import TwoWayDict
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from distcore.textsafe import terminal_text
from distmon.widgets.compare_view import Arranged, Entry, Header, cell_text
from distmon.widgets.view_model import ROW_COLUMNS, JobRow

# Fixed widths for the columns that change in place: re-measuring every column on each update
# was the biggest cost of a live table. The name takes what the width leaves (the input-wait
# column stays in view from 120 columns on); comparison columns follow, scrolled to.
COLUMN_WIDTHS = {"": 2, "step": 8, "loss": 9, "acc": 6, "ex/s": 7, "wait": 4}
NAME_LIMIT = 80  # characters of a job's name in the table
MIN_NAME = 8
HEADER_LIMIT = 16  # characters of a comparison column's header
STATUS_STYLE = {
    "live": "green", "idle": "yellow", "gone": "red", "running": "green", "finished": "cyan",
    "failed": "bold red", "diverged": "bold red", "stopped": "yellow",
}  # fmt: skip
_KEYS = ("mark", *ROW_COLUMNS[1:])


class _Mark(Text):
    """The first cell of a row, which knows its row: DataTable's sort hands the key function
    cells, not keys, and reordering by position must not re-render a row."""

    row_key: str = ""


def _fast_text(text: str) -> Text:
    """Text(text) for a printable string, without rich's constructor (which strips control
    codes a printable string has none of): ten cells a row, 10,000 rows while a sweep's first
    read lands, and Text() was a third of building a row."""
    if not text.isprintable():
        return Text(text)
    cell = Text.__new__(Text)
    cell._text, cell.style, cell._spans, cell._length = [text], "", [], len(text)
    cell.justify = cell.overflow = cell.no_wrap = cell.tab_size = None
    cell.end = "\n"
    return cell


def _same_as_rich(make: Callable[[str], Text]) -> bool:
    """Whether `make` builds what Text() builds, slot for slot (on this rich's version)."""
    try:
        ours, theirs = make("1.5e-3"), Text("1.5e-3")
        return all(getattr(ours, n) == getattr(theirs, n) for n in Text.__slots__)
    except (AttributeError, TypeError):
        return False


_text: Callable[[str], Text] = _fast_text if _same_as_rich(_fast_text) else Text


def _signature(item: Entry | Header, selected: bool) -> object:
    if isinstance(item, Header):
        return item.label
    return (item.row, item.compare, selected)


class RunsTable(DataTable[Text | str]):
    BINDINGS = [  # noqa: RUF012 - Textual's convention
        Binding("j", "cursor_down", "down", show=False),
        Binding("k", "cursor_up", "up", show=False),
        Binding("space", "toggle_select", "select"),
        Binding("enter", "focus_job", "focus"),
    ]

    @dataclass
    class ToggleSelect(Message):
        key: str

    @dataclass
    class FocusJob(Message):
        key: str

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self._keys: list[str] = []  # row keys in table order
        self._signatures: dict[str, object] = {}
        self._columns: tuple[str, ...] | None = None  # comparison columns on screen
        self._items: tuple[Entry | Header, ...] = ()
        self._arranged: Arranged | None = None
        self._selected: frozenset[str] = frozenset()
        self._built_width = -1
        self.renders = 0  # rows rendered (added or updated): for tests and the benchmark

    def show(self, arranged: Arranged, selected: frozenset[str]) -> None:
        """Update only what changed: new rows, vanished rows, changed cells, the order."""
        if arranged is self._arranged and selected == self._selected:
            return  # an idle refresh: nothing to compare
        self._arranged = arranged
        items = arranged.items
        self._items, self._selected = items, selected
        if arranged.columns != self._columns or self._built_width != self.size.width:
            self._rebuild(arranged.columns)
            return
        wanted = {self._key(i): i for i in items}
        kept = [k for k in self._keys if k in wanted]
        for key in [k for k in self._keys if k not in wanted]:
            self.remove_row(key)
            del self._signatures[key]
        for key, item in wanted.items():
            signature = _signature(item, key in selected)
            old = self._signatures.get(key)
            if old is None:
                self.add_row(*self._cells(item, key in selected), key=key)
                kept.append(key)
                self.renders += 1
            elif old is not signature and old != signature:
                self._update_row(key, item, key in selected)
            self._signatures[key] = signature
        self._keys = kept  # the table's order now: the kept rows, then the added ones
        keys = list(wanted)
        if keys != kept:
            self._reorder(keys)

    @staticmethod
    def _key(item: Entry | Header) -> str:
        return item.key if isinstance(item, Header) else item.row.key

    def _reorder(self, keys: list[str]) -> None:
        current = self.current_key
        position = {key: i for i, key in enumerate(keys)}
        if not self._place(keys):
            self.sort("mark", key=lambda mark: position[mark.row_key])
        self._keys = keys
        if current in position:
            self.move_cursor(row=position[current], animate=False)

    def _place(self, keys: list[str]) -> bool:
        """The rows in `keys`' order, set as DataTable.sort sets it but without sorting: the
        order is known, and sorting 10,000 rows through a key function on every draw while
        a sweep's first read lands was a fifth of the UI thread's time. False (then sort)
        on a Textual whose table keeps its order otherwise."""
        locations = getattr(self, "_row_locations", None)
        if not isinstance(locations, TwoWayDict) or len(keys) != len(self._data):
            return False
        self._row_locations = TwoWayDict({RowKey(key): i for i, key in enumerate(keys)})
        self._update_count += 1
        self.refresh()
        return True

    def _cells(self, item: Entry | Header, selected: bool) -> list[Text | str]:
        key = self._key(item)
        mark = _Mark()
        mark.row_key = key
        if isinstance(item, Header):
            count = len(_KEYS) - 2 + len(self._columns or ())
            blanks: list[Text | str] = [Text() for _ in range(count)]
            return [mark, Text(item.label, style="bold"), *blanks]
        row = item.row
        mark.append(row.mark, style=STATUS_STYLE.get(row.status, ""))
        mark.append("◆" if selected else " ", style="bold magenta")
        # The name comes from the logdir: control characters escaped, 10,000 characters elided.
        name = Text(terminal_text(row.key, NAME_LIMIT), style="bold magenta" if selected else "")
        # Text, never str: DataTable reads a str cell as markup, on every render (an hparam
        # value "[red]x" would be styled, and parsing it was a fifth of a frame's cost).
        extra = [_text(cell_text(item.compare.get(c))) for c in self._columns or ()]
        return [mark, name, *(_text(c) for c in row.cells()[2:]), *extra]

    def _name_width(self) -> int:
        longest = max(
            (len(terminal_text(self._key(i), NAME_LIMIT)) for i in self._items), default=4
        )
        longest = max(longest, 4)
        if self.size.width <= 0:
            return min(longest, NAME_LIMIT)
        others = sum(w + 2 * self.cell_padding for w in COLUMN_WIDTHS.values())
        room = self.size.width - 1 - others - 2 * self.cell_padding  # 1: the vertical scrollbar
        return max(MIN_NAME, min(longest, room))

    def _rebuild(self, columns: tuple[str, ...]) -> None:
        current = self.current_key
        self.clear(columns=True)
        self._columns, self._built_width = columns, self.size.width
        name_width = self._name_width()
        for label, key in zip(ROW_COLUMNS, _KEYS, strict=True):
            self.add_column(
                label, key=key, width=name_width if key == "job" else COLUMN_WIDTHS[label]
            )
        for column in columns:
            label = terminal_text(column, HEADER_LIMIT)
            self.add_column(label, key=f"c:{column}", width=max(len(label), 6))
        self._signatures = {}
        for item in self._items:
            key = self._key(item)
            self.add_row(*self._cells(item, key in self._selected), key=key)
            self._signatures[key] = _signature(item, key in self._selected)
        self.renders += len(self._items)
        self._keys = [self._key(i) for i in self._items]
        if current in self._keys:
            self.move_cursor(row=self._keys.index(current), animate=False)

    def _update_row(self, key: str, item: Entry | Header, selected: bool) -> None:
        column_keys = (*_KEYS, *(f"c:{c}" for c in self._columns or ()))
        for column, value in zip(column_keys, self._cells(item, selected), strict=True):
            self.update_cell(key, column, value)
        self.renders += 1

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """Textual's hook after rows are added: it measures every cell of each new row for
        the widths of auto-width columns, and this table has none (fixed widths). At 10,000
        rows the measuring was the biggest cost of filling the table (0.6 ms a row); only the
        scrollable size is needed. Textual's own, when a column is auto-width after all."""
        if any(column.auto_width for column in self.columns.values()):
            super()._update_dimensions(new_rows)
            return
        try:
            width = sum(column.get_render_width(self) for column in self.columns.values())
            header = self.header_height if self.show_header else 0
            size = Size(width + self._row_label_column_width, self._total_row_height + header)
        except AttributeError:  # a Textual without these: its own way
            super()._update_dimensions(new_rows)
            return
        self.virtual_size = size

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._built_width and self._columns is not None:
            self._rebuild(self._columns)

    @property
    def job_rows(self) -> tuple[JobRow, ...]:
        """The jobs' rows as shown, in table order (group headers left out)."""
        return tuple(i.row for i in self._items if isinstance(i, Entry))

    _rows = job_rows  # the name the dashboard's older tests read

    @property
    def current_key(self) -> str | None:
        if not self._keys or self.cursor_row < 0 or self.cursor_row >= len(self._keys):
            return None
        return self._keys[self.cursor_row]

    def action_toggle_select(self) -> None:
        if (key := self.current_key) is not None and not key.startswith("\x00"):
            self.post_message(self.ToggleSelect(key))

    def action_focus_job(self) -> None:
        if (key := self.current_key) is not None and not key.startswith("\x00"):
            self.post_message(self.FocusJob(key))
