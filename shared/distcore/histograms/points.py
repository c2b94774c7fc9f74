"""From a decoded histogram to the point a run keeps (its bands, computed once)."""

from __future__ import annotations

from distcore.histograms.buckets import Buckets
from distcore.histograms.compress import compress
from distcore.histograms.records import HistogramPoint


def histogram_point(step: int, wall_time: float, buckets: Buckets) -> HistogramPoint:
    return HistogramPoint(step=step, wall_time=wall_time, num=buckets.num,
                          bands=compress(buckets))
