"""`distmon --once --plot REGEX`: the charts of every scalar tag that matches, as braille text.

The dashboard's own chart renderer (distmon.render.braille) draws each chart, so a CI log or an
`ssh host distmon --once --plot loss` shows the curves a user would see on the screen. One chart
per tag, in the order of the tags' names; Keras' per-epoch series (`epoch_*`, written at x =
epoch) get their own charts, read in epochs, never a per-step axis shared with per-step series.

In colour (a terminal, no NO_COLOR), a tag's chart overlays the jobs, each job in its colour
(its validation curve the same colour, dimmed), the raw points dim under the smoothed curve, and
a legend names each colour. Without colour, curves cannot be told apart on one chart, so each
curve gets a chart of its own, named in its title, raw (no smoothed line to mistake for it).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Sequence
from typing import Final, TextIO

from rich.console import Console
from rich.text import Text

from distcore.errors import DistmonError
from distcore.jobs.snapshots import Job
from distcore.textsafe import terminal_text
from distmon.options import Options
from distmon.render.braille import PALETTE, render_chart
from distmon.render.curve import Curve
from distmon.render.distribution import HISTOGRAM_PREFIX
from distmon.render.view_model import all_tags, curves

MAX_CHARTS: Final = 24  # a sweep's 10,000 jobs are no report: the first charts, then a count
MAX_JOBS: Final = len(PALETTE)  # jobs overlaid on one chart: one colour each
HEIGHT: Final = 12  # lines of one chart, its x axis included
SMOOTHING: Final = 0.6  # TensorBoard's default, as the dashboard starts
DEFAULT_WIDTH: Final = 100  # where the output is no terminal


def run_plot(options: Options, out: TextIO) -> int:
    """Print the charts; DistmonError (exit 2) when no tag matches, naming the tags there are."""
    from distmon.table_text import collect_jobs, table_of

    snap = collect_jobs(options)
    by_name = {job.name: job for job in snap.jobs}
    jobs = [by_name[row.name] for row in table_of(snap, options).rows if row.name in by_name]
    pattern = re.compile(options.plot or "", re.IGNORECASE)
    tags = [t for t in all_tags(jobs) if not t.startswith(HISTOGRAM_PREFIX) and pattern.search(t)]
    if not tags:
        there = ", ".join(terminal_text(t, 40) for t in all_tags(jobs)[:20]) or "none"
        raise DistmonError(f"--plot: no tag matches {terminal_text(options.plot, 80)!r} "
                           f"(tags: {there})")
    color = _in_colour(out)
    width = options.width or (shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
                              if out.isatty() else DEFAULT_WIDTH)
    console = Console(file=out, width=width, force_terminal=color, no_color=not color,
                      highlight=False, emoji=False, markup=False)
    charts = [chart for tag in tags for chart in _charts(jobs[:MAX_JOBS], tag, color)]
    for title, drawn, legend in charts[:MAX_CHARTS]:
        console.print(Text(title, style="bold"))
        console.print(render_chart(drawn, width, HEIGHT, mode="step"))
        if legend.plain:
            console.print(legend)
        console.print()
    left = len(charts) - MAX_CHARTS
    more_jobs = len(jobs) - MAX_JOBS
    for note in ((f"{left} more charts not shown: narrow --plot",) if left > 0 else ()) + (
        (f"{more_jobs} more jobs not shown: narrow them with --filter",) if more_jobs > 0 else ()
    ):
        print(f"distmon: {note}", file=sys.stderr)
    return 0


def _in_colour(out: TextIO) -> bool:
    return out.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def _charts(jobs: Sequence[Job], tag: str, color: bool) -> list[tuple[str, list[Curve], Text]]:
    """(title, curves, legend) of the charts one tag makes."""
    axis = "epoch" if _per_epoch(tag) else "step"
    name = terminal_text(tag, 120)
    raw = curves(jobs, tag, "step", 0.0)
    if not color:
        return [(f"{name} · {terminal_text(c.label, 80)} · {axis} · raw", [c], Text())
                for c in raw]
    smoothed = curves(jobs, tag, "step", SMOOTHING)
    under = [Curve(c.label, c.xs, c.ys, c.color, dim=True) for c in raw]
    return [(f"{name} · {axis} · ema {SMOOTHING:g} over raw", [*under, *smoothed],
             _legend(smoothed))]


def _per_epoch(tag: str) -> bool:
    """Keras' TensorBoard callback writes `epoch_*` at x = epoch (its batch series at steps)."""
    return tag.rsplit("/", 1)[-1].startswith("epoch_")


def _legend(drawn: Sequence[Curve]) -> Text:
    legend = Text()
    for curve in drawn:
        colour = PALETTE[curve.color % len(PALETTE)]
        legend.append("━━ ", style=f"{colour} dim" if curve.dim else colour)
        legend.append(terminal_text(curve.label, 60) + "   ")
    return legend
