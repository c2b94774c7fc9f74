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
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from distcore.jobs.inputs import RunSource, Telemetry
from distcore.jobs.slurm_states import SlurmStates
from distcore.jobs.snapshots import HostSource, JobsSnapshot
from distcore.producer import Producer
from distmon.options import Options

__all__ = ["Producer", "ProducerSet", "Producers", "RunSource", "Telemetry", "Watcher",
           "make_producers"]

if TYPE_CHECKING:  # heavy packages (numpy, NVML): imported by make_producers, off the UI thread
    from distcore.jobs.index import JobIndex
    from distcore.jobs.profiles import ProfileReader
    from distcore.remote import RemoteProducers


ScanDone = Callable[[float, "str | None"], None]  # a scan's seconds and its error, if any
SLURM_MIN_INTERVAL = 5.0  # squeue at most this often: the controller serves a whole cluster


class Watcher(Producer, Protocol):
    """The logdir watcher: a producer whose first scan can run on the caller's thread."""

    def scan_once(self) -> Any: ...

    def progress(self) -> tuple[int, int] | None:
        """(runs read, runs to read) while a first read is under way; None otherwise."""
        ...

    def agent_changes(self) -> frozenset[Path]:
        """The local job directories whose run.json was written since the last call."""
        ...

    def subscribe_agent_changes(self, callback: Callable[[], None]) -> Callable[[], None]: ...


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
    # The remote readers (one of `extra`), for `--once`'s one pass (it asks each once, no
    # thread); the scheduler's states, which the index hands to the jobs (started and closed
    # with the extras).
    remote: RemoteProducers | None = None
    slurm: SlurmStates | None = None
    # The jobs' TensorFlow profiles (local ones, and remote ones' copies), read once each on its
    # own thread.
    profiles: ProfileReader | None = None


def make_producers(options: Options, *, first_drawn: threading.Event | None = None) -> Producers:
    """The real producers: a logdir watcher over a run store, and an NVML (or simulated) sampler.
    `first_drawn`: the dashboard sets it once it drew the first rows (the watcher's first read
    lets it draw them before reading the rest)."""
    from distcore.events.store import RunStore
    from distcore.events.watch import LogdirWatcher
    from distcore.jobs.profiles import ProfileReader
    from distcore.telemetry import make_source
    from distcore.telemetry.sampler import TelemetrySampler

    store = RunStore(max_points=options.max_points)
    watcher = LogdirWatcher(list(options.logdirs), store, poll=options.poll,
                            first_drawn=first_drawn)
    source = make_source(no_gpu=options.no_gpu, simulate_gpus=options.simulate_gpus)
    sampler = TelemetrySampler(source, interval=options.refresh)
    # The Slurm state of each job whose run.json names one (squeue on its own thread).
    slurm = SlurmStates(interval=max(options.refresh, SLURM_MIN_INTERVAL))
    if not options.remotes:
        return Producers(store, watcher, sampler, slurm=slurm, profiles=ProfileReader())
    # host:PATH and URLs fill the same store; remote hosts' GPUs are more hosts for the index.
    from distcore.remote import make_remote_producers

    remote = make_remote_producers(
        options.remotes, store, refresh=options.refresh, ssh_config=options.ssh_config,
        storage_options=options.storage_options, gpus=not options.no_gpu,
    )  # fmt: skip
    # Remote jobs' profiles are read from the copies their readers make (remote.profiles).
    return Producers(store, watcher, sampler, hosts=remote.host_sources, extra=(remote,),
                     remote=remote, slurm=slurm, profiles=ProfileReader(mirror=remote.profiles))


class ProducerSet:
    """The producers and their job index, started and closed as one: what the dashboard and
    `--serve` run. `made` is the producers, or a factory for them that `build()` calls (the
    dashboard builds them off its UI thread: their imports take a while). Starting builds the
    index over them, starts the samplers, host sources and extras, then the index, then scans
    the logdirs once and watches them. `close()` may come at any time, from any thread, even
    before or during `start()`: nothing it would not close is started after it."""

    def __init__(
        self,
        made: Producers | Callable[[], Producers],
        options: Options,
        *,
        clock: Callable[[], float] | None = None,
        logdirs: Sequence[str] | None = None,
    ) -> None:
        """`logdirs`: what the snapshots name as read (default: the options' logdirs)."""
        self._factory = made if callable(made) else None
        self._logdirs = [str(p) for p in options.logdirs] if logdirs is None else list(logdirs)
        self._options, self._clock = options, clock or time.time
        # An injected clock (a test's frozen one) is also how time passes for the index.
        self._monotonic = time.monotonic if clock is None else clock
        self._made: Producers | None = None
        self._index: JobIndex | None = None
        self._lock = threading.Lock()
        self._closing = False
        self._started: list[Producer | HostSource] = []
        if isinstance(made, Producers):
            self._adopt(made)

    def _adopt(self, made: Producers) -> JobIndex:
        from distcore.jobs.index import JobIndex

        index = JobIndex(
            made.store,
            logdirs=self._logdirs,
            telemetry=made.telemetry,
            hosts=made.hosts,
            scheduler=made.slurm,
            records=() if made.remote is None else (made.remote,),
            producers=[p for p in (made.watcher, *made.extra) if p is not None],
            profiles=made.profiles,
            interval=self._options.refresh,
            clock=self._clock,
            monotonic=self._monotonic,
            prices=(self._options.price_gpu_hour, self._options.price_kwh),
            agent_files=made.watcher,
        )
        self._made, self._index = made, index
        return index

    @property
    def made(self) -> Producers | None:
        """The producers, once built."""
        return self._made

    @property
    def index(self) -> JobIndex:
        if self._index is None:
            raise RuntimeError("the producers are not built yet")
        return self._index

    def built_index(self) -> JobIndex | None:
        return self._index

    def read_progress(self) -> tuple[int, int] | None:
        """How far the watcher's first read is (the dashboard's header), once built."""
        watcher = self._made.watcher if self._made is not None else None
        return watcher.progress() if watcher is not None else None

    def build(self) -> JobIndex:
        """Build the producers (the factory, on the calling thread) and their index, once."""
        if self._index is not None:
            return self._index
        assert self._factory is not None
        return self._adopt(self._factory())

    def _start(self, producer: Producer | HostSource) -> bool:
        with self._lock:  # never start what close() would not close
            if self._closing:
                return False
            self._started.append(producer)
            producer.start()
            return True

    def start_producers(self) -> bool:
        """Build, then start everything but the watcher; False once closed."""
        index = self.build()
        made = self.made
        assert made is not None
        for producer in (made.telemetry, *made.hosts, *made.extra, made.slurm, made.profiles,
                         index):
            if producer is not None and not self._start(producer):
                return False
        return True

    def scan(self, *, start_watching: bool = True) -> None:
        """Read the logdirs once on the calling thread (it may take a while), then watch them;
        the index shows what the scan read in its next snapshot. A reload (`start_watching`
        False) also has every remote host refreshed now, however quiet it was."""
        if not start_watching and self.made is not None and self.made.remote is not None:
            self.made.remote.wake()  # on their own threads, beside the local scan below
        watcher = self.made.watcher if self.made is not None else None
        if watcher is None:
            return
        watcher.scan_once()
        if start_watching and not self._start(watcher):
            return
        self.index.wake()

    def launch(
        self, on_snapshot: Callable[[JobsSnapshot], None], on_scan: ScanDone
    ) -> None:
        """The dashboard's start, on a worker thread: build, subscribe `on_snapshot` to the
        index, start, then the first scan; `on_scan(seconds, error)` once it ends. A failure is
        handed to `on_scan` (the dashboard stays up and shows it), never raised."""
        try:
            self.build().subscribe(on_snapshot)
            if not self.start_producers():
                return  # closing: nothing was left running
        except Exception as err:
            on_scan(0.0, f"{type(err).__name__}: {err}")
            return
        self.timed_scan(on_scan, start_watching=True)  # the index's first tick is at once

    def timed_scan(self, on_scan: ScanDone, *, start_watching: bool = False) -> None:
        """`scan` (a reload: `start_watching` False), then `on_scan(seconds, error or None)`."""
        began = time.monotonic()
        try:
            self.scan(start_watching=start_watching)
        except Exception as err:  # the caller shows it
            on_scan(time.monotonic() - began, f"{err}")
            return
        on_scan(time.monotonic() - began, None)

    def start(self) -> None:
        """Start everything; the first scan runs on the calling thread (it may take a while)."""
        if self.start_producers():
            self.scan()
            self.index.wake()  # a first snapshot soon, watcher or not

    def read_once(self) -> JobsSnapshot:
        """`--once`: every source read once on the calling thread (the remote ones in
        parallel), one GPU sample, the index's snapshot; then the jobs' profiles (each
        summarised in its own subprocess) and the jobs' Slurm states, and the snapshot again.
        Starts no thread; closes what holds a source open."""
        index = self.build()
        made = self.made
        assert made is not None
        try:
            if made.watcher is not None:
                made.watcher.scan_once()
            if made.remote is not None:
                from distcore.remote.wiring import scan_remote_once

                scan_remote_once(made.remote)
            if made.telemetry is not None:
                made.telemetry.sample_once()
            snap = index.refresh()
            if snap is not None and made.profiles is not None and made.profiles.watching():
                made.profiles.read_once()  # bounded: those not read in time say so
                snap = index.refresh()
            if snap is not None and made.slurm is not None and made.slurm.query_once():
                snap = index.refresh()
        finally:
            for producer in (made.telemetry, made.remote):
                if producer is not None:
                    producer.close()
        if snap is None:  # the index failed: its error says why
            raise RuntimeError("; ".join(e.message for e in index.errors()) or "job index failed")
        return snap

    def close(self) -> None:
        with self._lock:
            self._closing = True
            started, self._started = self._started, []
        # The index first (it reads the others), then the rest, newest first; one that fails
        # to close does not keep the others open.
        index = self._index
        first = [p for p in started if p is index]
        failures: list[Exception] = []
        for producer in first + [p for p in reversed(started) if p is not index]:
            try:
                producer.close()
            except Exception as err:
                failures.append(err)
        if failures:
            raise failures[0]
