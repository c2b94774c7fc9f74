"""The chart grid screen: one chart per scalar tag of the charted jobs, as many as fit, paged,
filtered, maximised, with a cursor that reads values and a zoom to a step range.

Pushed over the dashboard (its `v`), it asks the dashboard for the charted jobs (the focused
job, else the overlaid ones) each refresh, and draws again only when they or its own view
changed. Its keys replace one frozen `GridState` (distmon.render.grid_state); the page is a pure
function of the jobs, that state and the size (distmon.render.grid_page).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Input

from distcore.jobs.snapshots import Job
from distmon import keymaps
from distmon.render import grid_state as grids
from distmon.render.grid import x_values
from distmon.render.grid_model import GridMemory, grid_tags
from distmon.render.grid_page import draw_page, focused_chart, span_of
from distmon.render.grid_state import GridState


class GridView(Widget):
    """The page of charts, drawn again only when the jobs, the view or the size changed."""

    can_focus = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.memory = GridMemory()  # each run's colour while the grid is open
        self.jobs: tuple[Job, ...] = ()
        self.state = GridState()
        self._cache: tuple[object, Text] | None = None

    def show(self, jobs: Sequence[Job], state: GridState) -> None:
        self.jobs, self.state = tuple(jobs), state
        self.refresh()

    def render(self) -> Text:
        width, height = self.content_size
        color = not self.app.no_color
        key = (tuple((j.name, j.version) for j in self.jobs), self.state, width, height, color)
        if self._cache is None or self._cache[0] != key:
            page = draw_page(self.jobs, self.state, width, height, self.memory, color)
            self._cache = (key, page)
        return self._cache[1]


class ChartGridScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = keymaps.CHART_GRID
    DEFAULT_CSS = """
    ChartGridScreen GridView { height: 1fr; }
    ChartGridScreen #tag-filter { display: none; }
    ChartGridScreen #tag-filter.-shown { display: block; }
    """

    def __init__(self, charted: Callable[[], Sequence[Job]], every: float = 1.0) -> None:
        """`charted`: the jobs to chart now (asked again every `every` seconds)."""
        super().__init__()
        self._charted = charted
        self._every = every
        self.state = GridState()

    def compose(self) -> ComposeResult:
        yield GridView()
        yield Input(placeholder="tags: regular expression", id="tag-filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(GridView).focus()
        self._poll()
        self.set_interval(self._every, self._poll)

    def _poll(self) -> None:
        view = self.query_one(GridView)
        jobs = tuple(self._charted())
        if [(j.name, j.version) for j in jobs] != [(j.name, j.version) for j in view.jobs]:
            view.show(jobs, self.state)

    def _set(self, state: GridState) -> None:
        self.state = state
        view = self.query_one(GridView)
        view.show(view.jobs, state)

    def _tags(self) -> tuple[str, ...]:
        return grid_tags(self.query_one(GridView).jobs, self.state.pattern)

    def _xs(self) -> list[float]:
        view = self.query_one(GridView)
        chart = focused_chart(view.jobs, self.state, view.memory)
        return [] if chart is None else x_values(chart, span_of(self.state))

    def action_back(self) -> None:
        box = self.query_one("#tag-filter", Input)
        if box.has_focus:  # escape while typing: the filter closes, the grid stays
            box.remove_class("-shown")
            self.query_one(GridView).focus()
        else:
            self.dismiss()

    def action_cursor(self, delta: int) -> None:
        self._set(grids.moved_cursor(self.state, self._xs(), delta))

    def action_zoom_in(self) -> None:
        self._set(grids.zoomed_in(self.state, self._xs()))

    def action_zoom_out(self) -> None:
        self._set(grids.zoomed_out(self.state))

    def action_focus_chart(self, delta: int) -> None:
        self._set(grids.focused(self.state, delta, len(self._tags())))

    def action_page(self, delta: int) -> None:
        size = grids.per_page(self.state, *self.query_one(GridView).content_size)
        self._set(grids.paged(self.state, delta, len(self._tags()), size))

    def action_maximise(self) -> None:
        self._set(grids.toggled_maximised(self.state))

    def action_outliers(self) -> None:
        self._set(grids.toggled_outliers(self.state))

    def action_smoothing(self, direction: int) -> None:
        self._set(grids.smoothed(self.state, direction))

    def action_filter(self) -> None:
        box = self.query_one("#tag-filter", Input)
        box.add_class("-shown")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self._set(grids.with_pattern(self.state, event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(GridView).focus()
