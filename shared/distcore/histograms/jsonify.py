"""A run's histograms as `distmon --once --json` gives them: per tag the newest point's step,
the count of points read, the values in the newest histogram and its distribution bands."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distcore.histograms.compress import BAND_KEYS
from distcore.histograms.records import HistogramSeries
from distcore.snapshot import json_float
from distcore.textsafe import json_names


def histogram_to_json(series: HistogramSeries) -> dict[str, Any]:
    last = series.last
    return {
        "last_step": last.step,
        "last_wall_time": json_float(last.wall_time),
        "count": series.count,
        "num": json_float(last.num),
        "percentiles": {k: json_float(v) for k, v in zip(BAND_KEYS, last.bands, strict=True)},
    }


def histograms_to_json(histograms: Mapping[str, HistogramSeries]) -> dict[str, Any]:
    keys = json_names(histograms)  # the one rule for keys that would print alike
    return {keys[tag]: histogram_to_json(s) for tag, s in histograms.items()}
