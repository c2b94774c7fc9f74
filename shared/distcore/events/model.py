"""What the reader hands out: immutable snapshots of runs and their scalar series."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from distcore.histograms.model import HistogramSeries

RunStatus = Literal["live", "idle", "gone"]


@dataclass(frozen=True)
class Series:
    """One scalar tag of one run. steps/values/wall_times are the kept points, oldest first:
    at most the store's bound, decimated so that the first and last points and the curve's
    minima and maxima survive. The other fields are exact over every point read, after restarts
    were purged (see series.py for the one approximation, a purge inside a decimated stretch)."""

    tag: str
    steps: tuple[int, ...]
    values: tuple[float, ...]
    wall_times: tuple[float, ...]
    last_step: int
    last_value: float
    last_wall_time: float
    count: int
    min: float
    max: float


@dataclass(frozen=True)
class RunSnapshot:
    name: str
    path: Path
    status: RunStatus
    files: int
    problems: tuple[str, ...]
    hparams: Mapping[str, Any]
    scalars: Mapping[str, Series]
    last_update: float | None  # wall time of the newest point read
    version: int = 0  # counts the store's updates of this run: unchanged version, unchanged data
    histograms: Mapping[str, HistogramSeries] = field(
        default_factory=lambda: MappingProxyType({}))  # distcore.histograms, bounded per tag
