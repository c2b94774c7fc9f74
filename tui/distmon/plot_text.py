"""`distmon --once --plot REGEX`: the chart grid of every scalar tag that matches, as text.

The dashboard's grid (distmon.render.grid, its `v` screen) draws it, so a CI log or an
`ssh host distmon --once --plot loss` shows the charts a user would see on the screen: one chart
per tag, group by group, side by side as the width allows; Keras' per-epoch series (`epoch_*`,
written at x = epoch) are charts of their own, read in epochs, never a per-step axis shared with
per-step series.

In colour (a terminal, no NO_COLOR), a tag's chart overlays the runs, each in its colour (a
validation run the light tone of its train run's hue), the raw points faint under the smoothed
curve, and a legend names each colour. Without colour, the smoothed curves in the runs' line
styles, which the legend names in words.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Final, TextIO

from rich.console import Console

from distcore.errors import DistmonError
from distcore.textsafe import terminal_text
from distmon.options import Options
from distmon.render.braille import PALETTE
from distmon.render.grid import Shown, grid_rows, legend
from distmon.render.grid_model import GridMemory, grid_charts, grid_tags
from distmon.render.grid_state import MIN_WIDTH
from distmon.render.view_model import all_tags

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
    tags = grid_tags(jobs, options.plot or "")
    if not tags:
        there = ", ".join(terminal_text(t, 40) for t in all_tags(jobs)[:20]) or "none"
        raise DistmonError(f"--plot: no tag matches {terminal_text(options.plot, 80)!r} "
                           f"(tags: {there})")
    color = _in_colour(out)
    width = options.width or (shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
                              if out.isatty() else DEFAULT_WIDTH)
    console = Console(file=out, width=width, force_terminal=color, no_color=not color,
                      highlight=False, emoji=False, markup=False)
    memory = GridMemory()
    charts = grid_charts(jobs[:MAX_JOBS], tags[:MAX_CHARTS], SMOOTHING, memory)
    cols = max(1, min(len(charts), width // MIN_WIDTH))
    for line in grid_rows(charts, cols, width // cols, HEIGHT + 1, [Shown(color)] * len(charts)):
        console.print(line, crop=True)
    how = f"ema {SMOOTHING:g}" + (" over faint raw" if color else "")
    console.print(legend(memory.legend(jobs[:MAX_JOBS]), color, how), crop=True)
    left = len(tags) - MAX_CHARTS
    more_jobs = len(jobs) - MAX_JOBS
    for note in ((f"{left} more charts not shown: narrow --plot",) if left > 0 else ()) + (
        (f"{more_jobs} more jobs not shown: narrow them with --filter",) if more_jobs > 0 else ()
    ):
        print(f"distmon: {note}", file=sys.stderr)
    return 0


def _in_colour(out: TextIO) -> bool:
    return out.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
