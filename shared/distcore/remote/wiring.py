"""`--once` with remote sources: every remote source read once before the job index runs."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from distcore.remote import RemoteProducers

READERS = 32
"""Remote sources read at once: each moves a logdir's new bytes."""
SAMPLERS = 128
"""Remote hosts' GPUs sampled at once: each mostly waits (dmon's GPM answer takes a tick or two
on a host with GPM), so a pool of READERS would take those waits in turns, ~2 s per 32 hosts."""


def scan_remote_once(remote: RemoteProducers) -> None:
    """Every remote source read once and every remote host's GPUs sampled once, in parallel
    (one unreachable host costs its timeout once, not once per source). For `--once` with a
    job index: scan, then hand `remote.host_sources` and `remote` (its errors()) to the index."""
    reads: list[Callable[[], object]] = [p.scan_once for p in remote.producers]
    samples: list[Callable[[], object]] = [s.sample_once for s in remote.host_sources]
    # Handshakes are bounded by the connections themselves (MAX_HANDSHAKES); the pools only
    # keep a slow host from holding up the commands of hosts already connected.
    with ThreadPoolExecutor(max_workers=min(READERS, max(1, len(reads)))) as readers, \
            ThreadPoolExecutor(max_workers=min(SAMPLERS, max(1, len(samples)))) as samplers:
        futures = [readers.submit(job) for job in reads]
        futures += [samplers.submit(job) for job in samples]
        for future in futures:
            future.result()
