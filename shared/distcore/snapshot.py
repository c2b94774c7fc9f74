"""The JSON snapshot that `distmon --once --json` prints (version 1) and later issues extend.

Shape:
    {"version": 1, "generated_at": <unix s>, "logdirs": [...], "runs": [...],
     "gpus": {...}, "host": {...} | null, "alerts": [...]}
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

SNAPSHOT_VERSION = 1


def json_float(value: float | None) -> float | str | None:
    """JSON has no NaN or infinity: write them as the strings "nan", "inf", "-inf"."""
    if value is None:
        return None
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return float(value)


def build_snapshot(
    *,
    generated_at: float,
    logdirs: Sequence[str],
    runs: Sequence[Mapping[str, Any]],
    gpus: Mapping[str, Any],
    host: Mapping[str, Any] | None,
    alerts: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Assemble the document; each part is already JSON-ready."""
    return {
        "version": SNAPSHOT_VERSION,
        "generated_at": generated_at,
        "logdirs": list(logdirs),
        "runs": list(runs),
        "gpus": dict(gpus),
        "host": dict(host) if host is not None else None,
        "alerts": list(alerts),
    }
