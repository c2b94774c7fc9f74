"""A histogram tag on the chart: TensorBoard's distribution bands over the steps, as curves.

The chart draws the nine bands (min, ±1.5σ, ±σ, ±½σ, median, max; distcore.histograms) of the
shown jobs' histograms as lines in the job's colour, the median bright and the others dimmed, so
the line chart needs nothing new. A histogram tag is offered in the tag picker as
`HISTOGRAM_PREFIX + tag`, beside the scalar tags.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from distcore.histograms.records import HistogramSeries
from distcore.jobs.snapshots import Job
from distcore.textsafe import terminal_text
from distmon.render.curve import Curve, XMode

HISTOGRAM_PREFIX = "histogram: "
MEDIAN = 4  # the band at 50%


def histogram_tags(jobs: Iterable[Job]) -> set[str]:
    return {HISTOGRAM_PREFIX + t for j in jobs for r in j.parts.values() for t in r.histograms}


def _xs(series: HistogramSeries, mode: XMode) -> tuple[float, ...]:
    if mode == "step":
        return tuple(float(p.step) for p in series.points)
    walls = [p.wall_time for p in series.points]
    start = next((w for w in walls if math.isfinite(w)), 0.0) if mode == "relative" else 0.0
    return tuple(w - start for w in walls)


def band_curves(jobs: Sequence[Job], wanted: str, mode: XMode) -> tuple[Curve, ...]:
    """The bands of histogram tag `wanted` (with its prefix) of every shown job's parts."""
    from distmon.render.curve import Curve

    tag = wanted.removeprefix(HISTOGRAM_PREFIX)
    out = []
    for color, job in enumerate(jobs):
        for part, run in job.parts.items():
            series = run.histograms.get(tag)
            if series is None or not series.points:
                continue
            label = terminal_text(f"{job.name}/{part}" if part else job.name)
            xs = _xs(series, mode)
            bands = len(series.points[0].bands)
            for band in range(bands):
                ys = tuple(p.bands[band] for p in series.points)
                out.append(Curve(label, xs, ys, color, dim=band != MEDIAN))
    return tuple(out)
