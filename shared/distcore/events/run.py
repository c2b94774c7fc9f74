"""The mutable state of one run, owned by the store and changed only under its lock."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final

from distcore.events.series import SeriesBuffer
from distcore.events.snapshots import RunSnapshot, RunStatus
from distcore.histograms.store import HistogramStore
from distcore.location import RunLocation
from distcore.tfrecord import Batch

MAX_PROBLEM_LINES: Final = 20


class RunState:
    def __init__(self, name: str, path: RunLocation, max_points: int) -> None:
        self.name = name
        self.path = path
        self.max_points = max_points
        self.series: dict[str, SeriesBuffer] = {}
        self.hparams: dict[str, Any] = {}
        self.histograms = HistogramStore(max_points)
        self.files = 0
        self.gone = False
        self.last_update: float | None = None
        self.last_modified: float | None = None  # newest mtime among its files
        # (file name, kind) -> [count, first offset]
        self.problems: dict[tuple[str, str], list[int]] = {}
        self.file_errors: dict[str, str] = {}  # file name -> why it cannot be read now
        self._frozen: RunSnapshot | None = None
        self.version = 0  # bumped by every change, so consumers can skip unchanged runs

    def apply(self, batch: Batch, file_name: str) -> None:
        self._frozen = None
        self.version += 1
        for segment in batch.segments:
            for tag, (steps, walls, values) in segment.points.items():
                series = self.series.get(tag)
                if series is None:
                    series = self.series[tag] = SeriesBuffer(tag, self.max_points)
                series.extend(steps, walls, values)
            self.histograms.add(segment.histograms)
            if segment.restart_at is not None:
                for series in self.series.values():
                    series.purge_from(segment.restart_at)
                self.histograms.purge_from(segment.restart_at)
        self.hparams.update(batch.hparams)
        for kind, offset in batch.problems:
            entry = self.problems.setdefault((file_name, kind), [0, offset])
            entry[0] += 1
        if batch.newest_wall_time is not None:
            newest = batch.newest_wall_time
            self.last_update = newest if self.last_update is None else max(self.last_update, newest)

    def set_files(self, count: int, last_modified: float | None) -> None:
        if (count, last_modified, count == 0) != (self.files, self.last_modified, self.gone):
            self._frozen = None
            self.version += 1
        self.files, self.last_modified, self.gone = count, last_modified, count == 0

    def reset(self) -> None:
        """Back to nothing read (files, status and file errors stay: they are not read data)."""
        self._frozen = None
        self.series = {}
        self.histograms.clear()
        self.hparams = {}
        self.problems = {}
        self.last_update = None

    def set_file_error(self, file_name: str, error: str | None) -> None:
        if self.file_errors.get(file_name) == error:
            return
        self._frozen = None
        if error is None:
            self.file_errors.pop(file_name, None)
        else:
            self.file_errors[file_name] = error

    def status(self, now: float, live_seconds: float) -> RunStatus:
        if self.gone:
            return "gone"
        if self.last_modified is not None and now - self.last_modified <= live_seconds:
            return "live"
        return "idle"

    def problem_lines(self) -> tuple[str, ...]:
        if not self.file_errors and not self.problems:
            return ()  # nearly every run: its snapshot is built once per change, 10,000 a sweep
        lines = [f"{name}: {error}" for name, error in sorted(self.file_errors.items())]
        lines += [
            f"{name}: {kind} x{count} (first at byte {first})"
            for (name, kind), (count, first) in sorted(self.problems.items())
        ]
        if len(lines) > MAX_PROBLEM_LINES:
            more = len(lines) - MAX_PROBLEM_LINES + 1
            lines = [*lines[: MAX_PROBLEM_LINES - 1], f"... and {more} more"]
        return tuple(lines)

    def snapshot(self, now: float, live_seconds: float) -> RunSnapshot:
        status = self.status(now, live_seconds)
        if self._frozen is None or self._frozen.status != status:
            scalars = {t: s.snapshot() for t, s in sorted(self.series.items()) if len(s)}
            self._frozen = RunSnapshot(
                name=self.name,
                path=self.path,
                status=status,
                files=self.files,
                problems=self.problem_lines(),
                hparams=MappingProxyType(dict(self.hparams)),
                scalars=MappingProxyType(scalars),
                last_update=self.last_update,
                last_modified=self.last_modified,
                version=self.version,
                histograms=self.histograms.snapshot(),
            )
        return self._frozen
