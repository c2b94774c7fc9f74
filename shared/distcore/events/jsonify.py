"""A run as the `runs` element of `distmon --once --json` (NaN and infinities as strings)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from distcore.events.snapshots import RunSnapshot, Series
from distcore.histograms.jsonify import histograms_to_json
from distcore.snapshot import json_float
from distcore.textsafe import json_names, json_text


def _json_value(value: Any) -> Any:
    if isinstance(value, float):
        return json_float(value)
    return json_text(value) if isinstance(value, str) else value


def series_to_json(series: Series) -> dict[str, Any]:
    return {
        "last_step": series.last_step,
        "last_value": json_float(series.last_value),
        "last_wall_time": json_float(series.last_wall_time),
        "count": series.count,
        "min": json_float(series.min),
        "max": json_float(series.max),
    }


def run_to_json(run: RunSnapshot, name: str | None = None) -> dict[str, Any]:
    """`name`: the run's JSON name when the caller made it distinct among others (runs_to_json).
    Tags and hparams that would print alike keep apart by the one rule (textsafe.name_suffixes),
    applied here, before the keys are built: a dict of built keys would have lost one."""
    hparams, tags = json_names(run.hparams), json_names(run.scalars)
    return {
        "name": json_text(run.name) if name is None else name,
        "path": json_text(str(run.path)),  # local paths absolute, host:path, s3://...
        "status": run.status,
        "files": run.files,
        "problems": [json_text(p) for p in run.problems],
        "hparams": {hparams[k]: _json_value(v) for k, v in run.hparams.items()},
        "scalars": {tags[tag]: series_to_json(s) for tag, s in run.scalars.items()},
        "histograms": histograms_to_json(run.histograms),  # additive to version 1
    }


def runs_to_json(runs: Iterable[RunSnapshot]) -> list[dict[str, Any]]:
    """Runs whose names would print alike (a directory named with the byte 0xFF and one named
    with the text `\\xff`) are told apart by the one rule: " #2"."""
    runs = list(runs)
    names = json_names(r.name for r in runs)
    return [run_to_json(r, names[r.name]) for r in runs]
