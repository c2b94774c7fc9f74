"""A run as the `runs` element of `distmon --once --json` (NaN and infinities as strings)."""

from __future__ import annotations

from typing import Any

from distcore.events.model import RunSnapshot, Series
from distcore.remote.spec import run_path_text
from distcore.snapshot import json_float


def _json_value(value: Any) -> Any:
    return json_float(value) if isinstance(value, float) else value


def series_to_json(series: Series) -> dict[str, Any]:
    return {
        "last_step": series.last_step,
        "last_value": json_float(series.last_value),
        "last_wall_time": series.last_wall_time,
        "count": series.count,
        "min": json_float(series.min),
        "max": json_float(series.max),
    }


def run_to_json(run: RunSnapshot) -> dict[str, Any]:
    return {
        "name": run.name,
        "path": run_path_text(run.path),
        "status": run.status,
        "files": run.files,
        "problems": list(run.problems),
        "hparams": {k: _json_value(v) for k, v in run.hparams.items()},
        "scalars": {tag: series_to_json(s) for tag, s in run.scalars.items()},
    }
