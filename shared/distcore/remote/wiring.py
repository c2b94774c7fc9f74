"""`--once` with remote sources: every remote source read once before the job index runs."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from distcore.remote import RemoteProducers


def scan_remote_once(remote: RemoteProducers) -> None:
    """Every remote source read once and every remote host's GPUs sampled once, in parallel
    (one unreachable host costs its timeout once, not once per source). For `--once` with a
    job index: scan, then hand `remote.host_sources` and `remote` (its errors()) to the index."""
    jobs: list[Callable[[], object]] = [p.scan_once for p in remote.producers]
    jobs += [s.sample_once for s in remote.host_sources]
    # Handshakes are bounded by the connections themselves (MAX_HANDSHAKES); the pool only
    # keeps a slow host from holding up the commands of hosts already connected.
    with ThreadPoolExecutor(max_workers=min(32, max(1, len(jobs)))) as pool:
        for future in [pool.submit(job) for job in jobs]:
            future.result()
