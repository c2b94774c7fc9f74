"""The producers that feed the app, and the messages their threads post to it.

Producers are plain classes (distcore's watcher, store and sampler) seen here through protocols,
so that tests hand the app fixed data; messages are small and coalesced when they come fast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from textual.message import Message

from distmon.options import Options

if TYPE_CHECKING:  # heavy packages (numpy, NVML): imported by make_producers, off the UI thread
    from distcore.events.model import RunSnapshot
    from distcore.telemetry.model import TelemetrySnapshot


class RunSource(Protocol):
    def snapshot(self) -> tuple[RunSnapshot, ...]: ...
    def get(self, name: str) -> RunSnapshot | None: ...
    def subscribe(self, callback: Callable[[frozenset[str]], None]) -> Callable[[], None]: ...


class Watcher(Protocol):
    def scan_once(self) -> Any: ...
    def start(self) -> None: ...
    def close(self) -> None: ...


class Telemetry(Protocol):
    def start(self) -> None: ...
    def close(self) -> None: ...
    def latest(self) -> TelemetrySnapshot | None: ...
    def history(self, key: str) -> tuple[float | None, ...]: ...


@dataclass(frozen=True)
class Producers:
    """What feeds the dashboard: the run store (filled by the watcher) and the GPU sampler."""

    store: RunSource
    watcher: Watcher | None = None
    telemetry: Telemetry | None = None


def make_producers(options: Options) -> Producers:
    """The real producers: a logdir watcher over a run store, and an NVML (or simulated) sampler."""
    from distcore.events.store import RunStore
    from distcore.events.watch import LogdirWatcher
    from distcore.telemetry import make_source
    from distcore.telemetry.sampler import TelemetrySampler

    store = RunStore(max_points=options.max_points)
    watcher: Watcher = LogdirWatcher(list(options.logdirs), store, poll=options.poll)
    if options.remotes:  # issue 14: host:PATH and URLs fill the same store
        from distcore.remote import make_remote_producers
        from distcore.remote.wiring import WatcherWithRemote

        remote = make_remote_producers(
            options.remotes, store, refresh=options.refresh, ssh_config=options.ssh_config,
            storage_options=options.storage_options, gpus=not options.no_gpu,
        )  # fmt: skip
        watcher = WatcherWithRemote(watcher, remote)
    source = make_source(no_gpu=options.no_gpu, simulate_gpus=options.simulate_gpus)
    return Producers(store, watcher, TelemetrySampler(source, interval=options.refresh))


@dataclass
class RunsChanged(Message):
    """Some runs changed in the store; the app re-reads its snapshot, so a newer one replaces it."""

    names: frozenset[str]

    def can_replace(self, message: Message) -> bool:
        # Textual asks the older message whether the newer, pending one may replace it.
        if isinstance(message, RunsChanged):
            message.names = message.names | self.names
            return True
        return False


@dataclass
class ScanFinished(Message):
    """The initial (or reload) scan of the logdirs is done; `error` if it failed."""

    seconds: float
    error: str | None = None
