"""What feeds the dashboard: the producers (plain distcore classes, no Textual) and their factory.

The app builds them off the UI thread (their imports take a while) and wires them into one
`JobIndex`, whose snapshots it renders. Tests hand the app their own `Producers` (a fixed run
store, a sampler over prepared telemetry).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from distcore.producer import Producer, RunSource, Telemetry
from distmon.options import Options

__all__ = ["Producer", "ProducerSet", "Producers", "RunSource", "Telemetry", "Watcher",
           "make_producers"]

if TYPE_CHECKING:  # heavy packages (numpy, NVML): imported by make_producers, off the UI thread
    from distcore.jobs.model import HostSource


SLURM_MIN_INTERVAL = 5.0  # squeue at most this often: the controller serves a whole cluster


class Watcher(Producer, Protocol):
    """The logdir watcher: a producer whose first scan can run on the caller's thread."""

    def scan_once(self) -> Any: ...


@dataclass(frozen=True)
class Producers:
    """The run store (filled by the watcher), the GPU sampler, other hosts' sources (remote
    GPUs) and any other producers (remote readers) whose `errors()` the index gathers. `extra`
    producers are started and closed with the app."""

    store: RunSource
    watcher: Watcher | None = None
    telemetry: Telemetry | None = None
    hosts: Sequence[HostSource] = ()
    extra: Sequence[Producer] = field(default_factory=tuple)


def make_producers(options: Options) -> Producers:
    """The real producers: a logdir watcher over a run store, and an NVML (or simulated) sampler."""
    from distcore.events.store import RunStore
    from distcore.events.watch import LogdirWatcher
    from distcore.jobs.scheduler import SlurmStates
    from distcore.telemetry import make_source
    from distcore.telemetry.sampler import TelemetrySampler

    store = RunStore(max_points=options.max_points)
    watcher = LogdirWatcher(list(options.logdirs), store, poll=options.poll)
    source = make_source(no_gpu=options.no_gpu, simulate_gpus=options.simulate_gpus)
    sampler = TelemetrySampler(source, interval=options.refresh)
    # The Slurm state of each job whose run.json names one (squeue on its own thread).
    slurm = SlurmStates(interval=max(options.refresh, SLURM_MIN_INTERVAL))
    if not options.remotes:
        return Producers(store, watcher, sampler, extra=(slurm,))
    # host:PATH and URLs fill the same store; remote hosts' GPUs are more hosts for the index.
    from distcore.remote import make_remote_producers

    remote = make_remote_producers(
        options.remotes, store, refresh=options.refresh, ssh_config=options.ssh_config,
        storage_options=options.storage_options, gpus=not options.no_gpu,
    )  # fmt: skip
    return Producers(store, watcher, sampler, hosts=remote.host_sources, extra=(remote, slurm))


class ProducerSet:
    """The producers and their job index, started and closed as one: what `--serve` runs (and
    what the app can run later). Starting builds the index over `made`, starts the samplers,
    host sources and extras, then the index, then scans the logdirs once and watches them.
    `close()` may come at any time, from any thread, even during `start()`: nothing it would
    not close is started after it."""

    def __init__(
        self, made: Producers, options: Options, *, clock: Callable[[], float] | None = None
    ) -> None:
        from distcore.jobs.index import JobIndex

        self.made = made
        self.index = JobIndex(
            made.store,
            logdirs=[str(p) for p in options.logdirs],
            telemetry=made.telemetry,
            hosts=made.hosts,
            producers=[p for p in (made.watcher, *made.extra) if p is not None],
            interval=options.refresh,
            clock=clock or time.time,
        )
        self._lock = threading.Lock()
        self._closing = False
        self._started: list[Producer | HostSource] = []

    def _start(self, producer: Producer | HostSource) -> bool:
        with self._lock:  # never start what close() would not close
            if self._closing:
                return False
            self._started.append(producer)
            producer.start()
            return True

    def start(self) -> None:
        """Start everything; the first scan runs on the calling thread (it may take a while)."""
        made = self.made
        for producer in (made.telemetry, *made.hosts, *made.extra, self.index):
            if producer is not None and not self._start(producer):
                return
        if made.watcher is not None:
            made.watcher.scan_once()
            if not self._start(made.watcher):
                return
        self.index.wake()  # what the scan read, in the next snapshot

    def close(self) -> None:
        with self._lock:
            self._closing = True
            started, self._started = self._started, []
        # The index first (it reads the others), then the rest, newest first; one that fails
        # to close does not keep the others open.
        first = [p for p in started if p is self.index]
        failures: list[Exception] = []
        for producer in first + [p for p in reversed(started) if p is not self.index]:
            try:
                producer.close()
            except Exception as err:
                failures.append(err)
        if failures:
            raise failures[0]
