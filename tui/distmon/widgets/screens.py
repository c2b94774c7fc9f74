"""Modal screens: the help with every key binding, and the tag picker."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from distcore.textsafe import shown_names
from distmon.widgets.table_screens import TABLE_KEYS

DEFAULT_TAGS = "loss and accuracy"
KEYS: tuple[tuple[str, str], ...] = (
    ("q", "quit"),
    ("?", "this help"),
    ("/", "filter jobs by regular expression (enter keeps it, escape clears it)"),
    ("tab / shift+tab", "next / previous panel"),
    ("j k ↑ ↓", "move in the runs list, scroll the other panels"),
    ("space", "select a job to overlay on the charts (again to unselect)"),
    ("enter", "focus a job: its curves alone, and its plan from run.json"),
    ("escape", "unfocus, clear the filter, close this help"),
    ("t", "choose the tag of the second chart (any scalar or histogram)"),
    ("+ / -", "more / less smoothing (TensorBoard's debiased EMA)"),
    ("x", "x axis: step, relative time, wall time"),
    ("l", "log scale on the y axis"),
    ("r", "reload: read every logdir again"),
    *TABLE_KEYS,
)


def help_text() -> Text:
    width = max(len(k) for k, _ in KEYS)
    lines = [Text.assemble((key.ljust(width + 2), "bold cyan"), what) for key, what in KEYS]
    marks = Text(
        "\njobs: ● live  ○ idle  ✕ gone  ◆ selected\n"
        "distagent (run.json): ▶ running  ✓ finished  ✖ failed or diverged  ■ stopped",
        style="dim",
    )
    return Text("\n").join([*lines, marks])


class HelpScreen(ModalScreen[None]):
    BINDINGS = [  # noqa: RUF012 - Textual's convention
        Binding("escape,q,question_mark", "dismiss", "close"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="help"):
            yield Static(help_text())

    def on_mount(self) -> None:
        self.query_one("#help").border_title = "distmon keys"

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(None)


class TagPicker(ModalScreen[str | None]):
    """Lists every scalar tag of the jobs shown; the choice goes back to the app."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]  # noqa: RUF012

    def __init__(self, tags: Sequence[str]) -> None:
        super().__init__()
        self._tags = tags

    def compose(self) -> ComposeResult:
        # A tag is shown escaped and elided, as plain Content (a str prompt is read as markup).
        # Tags that would print alike are told apart (" #2"), as everywhere.
        names = shown_names(self._tags, 60)
        shown = (Option(Content(names[t]), id=t) for t in self._tags)
        options = [Option(DEFAULT_TAGS, id=DEFAULT_TAGS), *shown]
        with Vertical(id="picker"):
            yield OptionList(*options)

    def on_mount(self) -> None:
        self.query_one("#picker").border_title = "show tag"

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
