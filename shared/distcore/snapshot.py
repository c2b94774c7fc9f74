"""The JSON snapshot that `distmon --once --json` prints (version 2: each job's `profile` added
to version 1, whose keys it keeps as they were).
distcore.jobs.jsonify.to_json builds the whole document from one JobsSnapshot.

Shape:
    {"version": 2, "generated_at": <unix s>, "logdirs": [...], "runs": [...],
     "gpus": {...}, "host": {...} | null, "alerts": [...]}
"""

from __future__ import annotations

import math

SNAPSHOT_VERSION = 2


def json_float(value: float | None) -> float | str | None:
    """JSON has no NaN or infinity: write them as the strings "nan", "inf", "-inf"."""
    if value is None:
        return None
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return float(value)
