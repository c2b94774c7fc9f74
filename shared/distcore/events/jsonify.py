"""A run as the `runs` element of `distmon --once --json` (NaN and infinities as strings)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from distcore.alerts.spikes import SpikeSeen
from distcore.events.snapshots import RunSnapshot, Series
from distcore.histograms.jsonify import histograms_to_json
from distcore.snapshot import json_float
from distcore.textsafe import json_names, json_text


def _json_value(value: Any) -> Any:
    if isinstance(value, float):
        return json_float(value)
    return json_text(value) if isinstance(value, str) else value


def series_to_json(series: Series) -> dict[str, Any]:
    out: dict[str, Any] = {
        "last_step": series.last_step,
        "last_value": json_float(series.last_value),
        "last_wall_time": json_float(series.last_wall_time),
        "count": series.count,
        "min": json_float(series.min),
        "max": json_float(series.max),
    }
    history = series.spike_history
    if history is not None:  # a loss: every spike read, the newest kept listed (additive)
        out["spike_count"] = history.count
        out["spikes"] = [spike_to_json(s) for s in history.spikes]
    return out


def spike_to_json(seen: SpikeSeen) -> dict[str, Any]:
    return {"step": seen.step, "wall_time": json_float(seen.wall_time),
            "value": json_float(seen.value), "median": json_float(seen.median),
            "back_step": seen.back_step,
            "back_value": None if seen.back_value is None else json_float(seen.back_value)}


def run_to_json(
    run: RunSnapshot,
    name: str | None = None,
    names: Callable[[Mapping[str, Any]], dict[str, str]] = json_names,
) -> dict[str, Any]:
    """`name`: the run's JSON name when the caller made it distinct among others (runs_to_json).
    Tags and hparams that would print alike keep apart by the one rule (textsafe.name_suffixes),
    applied here, before the keys are built: a dict of built keys would have lost one. `names`:
    json_names, or a caller's memo of it (runs_to_json)."""
    hparams, tags = names(run.hparams), names(run.scalars)
    return {
        "name": json_text(run.name) if name is None else name,
        "path": json_text(str(run.path)),  # local paths absolute, host:path, s3://...
        "status": run.status,
        "files": run.files,
        "problems": [json_text(p) for p in run.problems],
        "hparams": {hparams[k]: _json_value(v) for k, v in run.hparams.items()},
        "scalars": {tags[tag]: series_to_json(s) for tag, s in run.scalars.items()},
        # additive to version 1
        "histograms": histograms_to_json(run.histograms) if run.histograms else {},
    }


class _Names:
    """json_names of each run's keys, once per set of keys: a sweep's runs share their tags
    and hparams, and finding each run's names again was a fifth of the runs' document."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, ...], dict[str, str]] = {}

    def __call__(self, keys: Mapping[str, Any]) -> dict[str, str]:
        order = tuple(keys)
        found = self._seen.get(order)
        if found is None:
            found = self._seen[order] = json_names(order)
        return found


def runs_to_json(runs: Iterable[RunSnapshot]) -> list[dict[str, Any]]:
    """Runs whose names would print alike (a directory named with the byte 0xFF and one named
    with the text `\\xff`) are told apart by the one rule: " #2"."""
    return list(iter_runs_json(list(runs)))


def iter_runs_json(runs: Sequence[RunSnapshot]) -> Iterator[dict[str, Any]]:
    """runs_to_json's elements, each made as it is read."""
    names = json_names(r.name for r in runs)
    keys = _Names()
    return (run_to_json(r, names[r.name], keys) for r in runs)
