"""distcore.remote: logdirs and GPUs on other machines, read into the same RunStore.

`make_remote_producers(specs, store, ...)` is the one entry point: it groups `host:PATH` sources
by host (one shared SSH connection, one reader thread and one `nvidia-smi` per host) and gives
each URL an fsspec reader. Every reader has start()/close()/errors()/scan_once()/readable()/
agent_records() (`RemoteReader`), each on a `distcore.producer.Loop` thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from distcore.jobs.snapshots import AgentRecord, Host, HostSource
from distcore.location import RunLocation
from distcore.producer import ProducerError
from distcore.remote.spec import (
    LocalSpec,
    SourceSpec,
    SshSpec,
    UrlSpec,
    parse_source,
    parse_sources,
    parse_storage_options,
)

if TYPE_CHECKING:  # annotations only: the CLI parses sources through this package, and the
    # store would import the whole reader (numpy, protobuf, watchdog) before the first screen
    from distcore.events.store import RunStore
    from distcore.remote.profiles import ProfileMirror

__all__ = [
    "LocalSpec",
    "RemoteProducers",
    "SourceSpec",
    "SshSpec",
    "UrlSpec",
    "make_remote_producers",
    "parse_source",
    "parse_sources",
    "parse_storage_options",
]


class RemoteReader(Protocol):
    def start(self) -> None: ...
    def close(self) -> None: ...
    def errors(self) -> tuple[ProducerError, ...]: ...
    def scan_once(self) -> frozenset[str]: ...
    def readable(self) -> bool: ...
    def agent_records(self) -> dict[RunLocation, AgentRecord | None]: ...


class RemoteHostSource(HostSource, Protocol):
    """A remote host's GPUs (SshGpuSource): a HostSource whose own failures are errors, and
    that `--once` samples once on the caller's thread."""

    def errors(self) -> tuple[ProducerError, ...]: ...
    def sample_once(self) -> None: ...


@dataclass(frozen=True)
class RemoteProducers:
    """All remote producers as one: start()/close() (idempotent, host sources included, the
    shared connections closed last), errors() of every reader, hosts() of every host source.
    For a job index: hosts=`host_sources`, producers=[this]."""

    producers: tuple[RemoteReader, ...]
    host_sources: tuple[RemoteHostSource, ...]
    closers: tuple[Callable[[], None], ...] = ()  # connections, closed after their users
    stoppers: tuple[Callable[[], None], ...] = ()  # connections told to end, first of all
    # The remote profiles' copies (the profile reader's Mirror), removed on close.
    profiles: ProfileMirror | None = None

    def start(self) -> None:
        for producer in self.producers:
            producer.start()
        for source in self.host_sources:
            source.start()

    def close(self) -> None:
        for stop in self.stoppers:  # every host's master ends at once, not one after another
            stop()
        for source in self.host_sources:
            source.close()
        for producer in self.producers:
            producer.close()
        for close in self.closers:
            close()
        if self.profiles is not None:
            self.profiles.close()

    def wake(self) -> None:
        """Every reader that paces itself refreshes now, at its interval again (a reload: `r`
        in the dashboard, however long a quiet host's wait had grown)."""
        for producer in self.producers:
            wake = getattr(producer, "wake", None)
            if wake is not None:
                wake()

    def scan_once(self) -> frozenset[str]:
        changed: set[str] = set()
        for producer in self.producers:
            changed |= producer.scan_once()
        return frozenset(changed)

    def errors(self) -> tuple[ProducerError, ...]:
        readers = (e for p in self.producers for e in p.errors())
        return (*readers, *(e for s in self.host_sources for e in s.errors()))

    def agent_records(self) -> dict[RunLocation, AgentRecord | None]:
        """Every remote job directory's run.json, as its reader last read it (the job index
        takes these instead of reading a local path)."""
        found: dict[RunLocation, AgentRecord | None] = {}
        for producer in self.producers:
            found.update(producer.agent_records())
        return found

    def problems(self) -> tuple[str, ...]:
        return ()  # a remote source's trouble is an error (one line per host or URL)

    def readable(self) -> bool:
        """True when at least one remote source was read (the --once exit rule)."""
        return any(p.readable() for p in self.producers)

    def hosts(self) -> tuple[Host, ...]:
        return tuple(h for s in self.host_sources for h in s.hosts())


def make_remote_producers(
    specs: Sequence[SourceSpec],
    store: RunStore,
    *,
    refresh: float = 1.0,
    ssh_config: Path | None = None,
    storage_options: Mapping[str, Any] | None = None,
    gpus: bool = True,
    clock: Callable[[], float] = time.time,
    connect_timeout: float = 10.0,
    profiles: bool = True,
) -> RemoteProducers:
    """Producers for the remote specs (local ones are ignored: the LogdirWatcher has them);
    with `profiles`, each copies its runs' newest TensorFlow profiles into one ProfileMirror
    (`RemoteProducers.profiles`), for a ProfileReader."""
    from distcore.remote.fsspec_logdir import FsspecLogdirReader
    from distcore.remote.nvidia_smi import SshGpuSource
    from distcore.remote.profiles import ProfileMirror
    from distcore.remote.ssh import SshConnection
    from distcore.remote.ssh_logdir import SshLogdirReader

    producers: list[RemoteReader] = []
    sources: list[RemoteHostSource] = []
    closers: list[Callable[[], None]] = []
    stoppers: list[Callable[[], None]] = []
    by_host: dict[str, list[SshSpec]] = {}
    mirror = ProfileMirror() if profiles else None
    for spec in dict.fromkeys(specs):  # the same source twice is read once
        if isinstance(spec, SshSpec):
            by_host.setdefault(spec.destination, []).append(spec)
        elif isinstance(spec, UrlSpec):
            producers.append(
                FsspecLogdirReader(
                    spec, store, storage_options=storage_options, interval=refresh, clock=clock,
                    profiles=mirror,
                )
            )
    hosts = [s[0].label for s in by_host.values()]
    for destination, host_specs in by_host.items():
        # Named by host; by user@host where one host is reached as several users.
        label = host_specs[0].label if hosts.count(host_specs[0].label) == 1 else destination
        conn = SshConnection(
            destination, ssh_config=ssh_config, clock=clock, connect_timeout=connect_timeout
        )
        closers.append(conn.close)
        stoppers.append(conn.stop_soon)
        producers.append(
            SshLogdirReader(conn, label, host_specs, store, interval=refresh, clock=clock,
                            profiles=mirror)
        )
        # The host is listed (`ssh:<host>`, its connection's state) even with --no-gpu.
        sources.append(SshGpuSource(conn, label, interval=refresh, clock=clock, sample=gpus))
    return RemoteProducers(tuple(producers), tuple(sources), tuple(closers), tuple(stoppers),
                           mirror)
