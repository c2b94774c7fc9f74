"""Alerts: what the rules raise, the facts they read, and the order they are shown in.

Every rule takes plain facts (the protocols below match distcore.events' RunSnapshot/Series and
distcore.telemetry's GpuDevice) and returns `Alert`s. Nothing here reads files or clocks: `now`
is passed in, so rules are table-tested. The rules live by family, each in its room:

- `distcore.alerts.series`: a run's points (input stall, NaN loss, rising or spiking loss, gradient
  spike; `spikes` finds a spike over its recent median and MAD, and tracks a loss's spikes over
  every point the store reads); they look at a series' tail (or the tracker's bounded history)
  only, and the job index (distcore.jobs) runs them again only for runs that changed.
- `distcore.alerts.cadence`: how often a run writes, and a run that stopped (`run_stalled`).
- `distcore.alerts.gpus`: the GPUs (imbalance, full memory) and idle GPUs while steps advance.
- `distcore.alerts.outcomes`: what distagent's run.json and the scheduler say became of a job.
- `distcore.alerts.workers` and `distcore.alerts.stragglers`: the workers' heartbeats (run.json's
  `workers`): a hang and who holds it, and the worker that holds every step back.

distcore.jobs.judge composes them into each job's alerts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

Severity = Literal["info", "warning", "critical"]
SEVERITY_ORDER: Final = {"critical": 0, "warning": 1, "info": 2}


class SeriesLike(Protocol):
    @property
    def steps(self) -> Sequence[int]: ...
    @property
    def values(self) -> Sequence[float]: ...
    @property
    def wall_times(self) -> Sequence[float]: ...
    @property
    def last_value(self) -> float: ...
    @property
    def last_wall_time(self) -> float: ...
    @property
    def count(self) -> int: ...


class RunLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def scalars(self) -> Mapping[str, SeriesLike]: ...
    @property
    def last_update(self) -> float | None: ...


class GpuLike(Protocol):
    @property
    def index(self) -> int: ...
    @property
    def utilization_gpu(self) -> float | None: ...
    @property
    def memory_used_mib(self) -> float | None: ...
    @property
    def memory_total_mib(self) -> float | None: ...


AlertKey = tuple[str, str | None, str | None, int | None]


@dataclass(frozen=True)
class Alert:
    kind: str
    severity: Severity
    run: str | None
    message: str
    since: float | None
    # What a run-less alert is about (a GPU rule's host, and its GPU where it names one): two
    # hosts' gpu_imbalance are two alerts, each with its own since, series and notification.
    host: str | None = None
    gpu: int | None = None

    @property
    def key(self) -> AlertKey:
        """Its identity while it persists: kind, run, host and GPU (never the message, whose
        figures change every refresh)."""
        return (self.kind, self.run, self.host, self.gpu)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "run": self.run,
            "host": self.host,
            "gpu": self.gpu,
            "message": self.message,
            "since": self.since,
        }


def sort_alerts(alerts: Iterable[Alert]) -> tuple[Alert, ...]:
    """Most severe first, then by run, kind, host and GPU: a stable order for screens and JSON."""
    return tuple(sorted(alerts, key=lambda a: (SEVERITY_ORDER[a.severity], a.run or "", a.kind,
                                               a.host or "", -1 if a.gpu is None else a.gpu)))


def keep_since(previous: Iterable[Alert], current: Iterable[Alert]) -> tuple[Alert, ...]:
    """An alert that persists keeps the `since` it was first raised with."""
    first = {a.key: a.since for a in previous}
    return tuple(dataclasses.replace(a, since=first.get(a.key, a.since)) for a in current)
