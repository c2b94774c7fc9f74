"""Chart widgets: a braille line chart of one metric of the shown jobs.

Two caches, one for each costly step: the curves are computed again only when the jobs (their
versions), the tag or the view's smoothing, axis, scale or the width changed; the braille
cells are drawn again only when the curves or the size changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text
from textual.content import Content
from textual.widget import Widget

from distcore.jobs.snapshots import Job
from distcore.textsafe import terminal_text
from distmon.render.braille import PALETTE, render_chart
from distmon.render.view_model import Curve, XMode, curves, split_run
from distmon.view import ViewState, chart_title

TITLE_LIMIT = 120  # characters of a chart title (it names a tag); the border crops it further


class LineChart(Widget):
    """One metric of the shown jobs; the border title says what and how."""

    can_focus = True

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._curves: tuple[Curve, ...] = ()
        self._log_y = False
        self._mode: XMode = "step"
        self._cache: tuple[object, Text] | None = None
        self._titles: tuple[str, Content] | None = None
        self._charted: object = None  # what `chart` computed the curves from

    def chart(
        self, jobs: Sequence[Job], tag: str, view: ViewState,
        colors: Mapping[str, int] | None = None,
    ) -> None:
        """`tag` of `jobs` as `view` says (smoothing, x axis, log scale), each job in its colour
        (`colors`; a job keeps its colour). The legend is fitted to the width: a resize plots
        again."""
        key = (tuple((j.name, j.version) for j in jobs), tag, view.x_mode, view.smoothing,
               view.log_y, self.size.width)  # fmt: skip
        if key == self._charted:
            return
        self._charted = key
        self.plot(curves(jobs, tag, view.x_mode, view.smoothing, colors),
                  title=chart_title(view, tag), log_y=view.log_y, mode=view.x_mode)

    def plot(self, curves: Sequence[Curve], *, title: str, log_y: bool, mode: XMode) -> None:
        """`title` is plain text (it may hold a tag's name): escaped, never read as markup."""
        curves = tuple(curves)
        # A title assignment re-lays the border out: only when it changed.
        subtitle = legend(curves, self.size.width)
        if (title, subtitle) != self._titles:
            self._titles = (title, subtitle)
            # Content(str) is plain text; a str would be parsed as markup.
            self.border_title = Content(terminal_text(title, TITLE_LIMIT))
            self.border_subtitle = subtitle
        if (curves, log_y, mode) == (self._curves, self._log_y, self._mode):
            return
        self._curves, self._log_y, self._mode = curves, log_y, mode
        self.refresh()

    def render(self) -> Text:
        width, height = self.content_size
        key = (self._curves, self._log_y, self._mode, width, height)
        if self._cache is None or self._cache[0] != key:
            text = render_chart(self._curves, width, height, log_y=self._log_y, mode=self._mode)
            self._cache = (key, text)
        return self._cache[1]


def legend(curves: Sequence[Curve], width: int) -> Content:
    """The jobs in their colours (a job's validation curve is its colour, dimmed); names are
    escaped and elided, and never read as markup."""
    parts: list[str | tuple[str, str]] = []
    used, seen = 0, set()
    for curve in curves:
        if curve.color in seen:
            continue
        seen.add(curve.color)
        label = terminal_text(split_run(curve.label)[0], 20)
        used += len(label) + 1
        if used > max(width - 6, 8):
            parts.append(" …")
            break
        parts.extend([" "] if parts else [])
        parts.append((label, PALETTE[curve.color % len(PALETTE)]))
    return Content.assemble(*parts)
