"""What the reader hands out: immutable snapshots of runs and their scalar series."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeVar, overload

from distcore.alerts.spikes import SpikeHistory
from distcore.histograms.records import HistogramSeries
from distcore.location import RunLocation

RunStatus = Literal["live", "idle", "gone"]
T = TypeVar("T", int, float)


class Column(Sequence[T]):
    """A read-only column of a series, shared with the store instead of copied into Python
    objects: 8 bytes a point rather than a tuple's 32, and no copy per snapshot. It reads like
    the tuple it replaces (items are Python numbers, it compares equal to a tuple of the same
    items, slices are columns); `np.asarray(column)` is the array itself, without a copy.

    The store never writes an array it has handed out (it builds new ones), so sharing is
    safe. Defined without importing numpy: `import distcore.events.snapshots` stays cheap."""

    __slots__ = ("_array",)

    def __init__(self, array: Any) -> None:
        self._array = array

    def __len__(self) -> int:
        return len(self._array)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Column[T]: ...
    def __getitem__(self, index: int | slice) -> T | Column[T]:
        if isinstance(index, slice):
            return Column(self._array[index])
        return self._array[index].item()

    def __iter__(self) -> Iterator[T]:
        return iter(self._array.tolist())

    def __bool__(self) -> bool:
        return len(self._array) > 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Column | tuple | list):
            return len(self) == len(other) and tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Column({tuple(self)!r})"

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return self._array if dtype is None else self._array.astype(dtype)

    def tolist(self) -> list[T]:
        return self._array.tolist()


@dataclass(frozen=True)
class Series:
    """One scalar tag of one run. steps/values/wall_times are the kept points, oldest first:
    at most the store's bound, decimated so that the first and last points and the curve's
    minima and maxima survive. The other fields are exact over every point read, after restarts
    were purged (see series.py for the one approximation, a purge inside a decimated stretch)."""

    tag: str
    steps: Sequence[int]  # a Column from the store (a tuple where built by hand)
    values: Sequence[float]
    wall_times: Sequence[float]
    last_step: int
    last_value: float
    last_wall_time: float
    count: int
    min: float
    max: float
    # A loss's spikes over every point read (alerts.spikes.SpikeTracker, fed by the store);
    # None for other tags and for a series built by hand.
    spike_history: SpikeHistory | None = None


@dataclass(frozen=True)
class RunSnapshot:
    name: str
    path: RunLocation  # where its files are: this machine, an SSH host or a URL
    status: RunStatus
    files: int
    problems: tuple[str, ...]
    hparams: Mapping[str, Any]
    scalars: Mapping[str, Series]
    last_update: float | None  # wall time of the newest point read
    version: int = 0  # counts the store's updates of this run: unchanged version, unchanged data
    last_modified: float | None = None  # newest modification time among its files
    histograms: Mapping[str, HistogramSeries] = field(
        default_factory=lambda: MappingProxyType({}))  # distcore.histograms, bounded per tag
