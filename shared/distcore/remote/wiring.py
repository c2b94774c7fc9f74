"""How the front ends take remote sources in, until the job index does: the dashboard's watcher
also drives the remote readers, and `--once` reads every remote source once."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from distcore.events.model import RunSnapshot
from distcore.events.store import RunStore
from distcore.jobs.model import Host
from distcore.remote import RemoteProducers, SourceSpec, make_remote_producers
from distcore.snapshot import json_float
from distcore.telemetry.jsonify import device_to_json
from distcore.textsafe import json_text


class _Watcher(Protocol):
    def scan_once(self) -> Any: ...
    def start(self) -> None: ...
    def close(self) -> None: ...


class WatcherWithRemote:
    """The local LogdirWatcher and the remote readers seen as one watcher (same store)."""

    def __init__(self, local: _Watcher, remote: RemoteProducers) -> None:
        self.local = local
        self.remote = remote

    def scan_once(self) -> frozenset[str]:
        changed = self.local.scan_once()
        return frozenset(changed or ()) | self.remote.scan_once()

    def start(self) -> None:
        self.local.start()
        self.remote.start()

    def close(self) -> None:
        self.remote.close()
        self.local.close()


@dataclass(frozen=True)
class RemoteOnce:
    runs: tuple[RunSnapshot, ...]
    hosts: tuple[Host, ...]
    errors: tuple[str, ...]  # one line each
    readable: bool  # at least one remote source was read


def read_remote_once(
    specs: Sequence[SourceSpec],
    *,
    max_points: int = 2000,
    ssh_config: Path | None = None,
    storage_options: Mapping[str, Any] | None = None,
    gpus: bool = True,
) -> RemoteOnce:
    """Every remote source read once (and each remote host's GPUs sampled once)."""
    store = RunStore(max_points=max_points)
    remote = make_remote_producers(
        specs, store, ssh_config=ssh_config, storage_options=storage_options, gpus=gpus
    )
    try:
        scan_remote_once(remote)
        hosts = remote.hosts()
        errors = tuple(e.message for e in remote.errors())
        return RemoteOnce(store.snapshot(), hosts, errors, remote.readable())
    finally:
        remote.close()


def scan_remote_once(remote: RemoteProducers) -> None:
    """Every remote source read once and every remote host's GPUs sampled once, in parallel
    (one unreachable host costs its timeout once, not once per source). For `--once` with a
    job index: scan, then hand `remote.host_sources` and `remote` (its errors()) to the index."""
    jobs: list[Callable[[], object]] = [p.scan_once for p in remote.producers]
    jobs += [s.sample_once for s in remote.host_sources if hasattr(s, "sample_once")]
    with ThreadPoolExecutor(max_workers=min(8, max(1, len(jobs)))) as pool:
        for future in [pool.submit(job) for job in jobs]:
            future.result()


def host_to_json(host: Host) -> dict[str, Any]:
    """A remote host for `--once --json` `hosts`: GPUs with the same fields as local ones."""
    return {
        "key": json_text(host.key),
        "name": json_text(host.name),
        "source": host.source,
        "worker": host.worker,
        "job": host.job,
        "sampled_at": json_float(host.sampled_at),
        "gpus": [device_to_json(g) for g in host.gpus],
        "gpu_reason": host.gpu_reason,
        "simulated": host.simulated,
        "cpu_percent": json_float(host.cpu_percent),
        "memory_used_mib": json_float(host.memory_used_mib),
        "memory_total_mib": json_float(host.memory_total_mib),
        "error": host.error,
    }
