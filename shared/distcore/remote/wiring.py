"""`--once` with remote sources: every remote source read once before the job index runs."""

from __future__ import annotations

import resource
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from distcore.remote import RemoteProducers

READERS = 32
"""Remote sources read at once: each moves a logdir's new bytes."""
SAMPLERS = 128
"""Remote hosts' GPUs sampled at once, at most: each mostly waits (dmon's GPM answer takes a
tick or two on a host with GPM), so a pool of READERS would take those waits in turns, ~2 s per
32 hosts."""
FDS_PER_SAMPLE = 16
"""Descriptors a sample may hold here (two ssh clients' pipes, with room for the readers and the
hosts' masters): the samplers are bounded by the process's limit too, so that at a limit of
1,024 (64 samplers) no sample fails for want of one."""


def sampler_count(hosts: int, open_files: int) -> int:
    """How many hosts' GPUs `--once` samples at once under an open-file limit of `open_files`."""
    return max(1, min(SAMPLERS, hosts, open_files // FDS_PER_SAMPLE))


def scan_remote_once(remote: RemoteProducers) -> None:
    """Every remote source read once and every remote host's GPUs sampled once, in parallel
    (one unreachable host costs its timeout once, not once per source). For `--once` with a
    job index: scan, then hand `remote.host_sources` and `remote` (its errors()) to the index."""
    reads: list[Callable[[], object]] = [p.scan_once for p in remote.producers]
    samples: list[Callable[[], object]] = [s.sample_once for s in remote.host_sources]
    # Handshakes are bounded by the connections themselves (MAX_HANDSHAKES); the pools only
    # keep a slow host from holding up the commands of hosts already connected.
    with ThreadPoolExecutor(max_workers=min(READERS, max(1, len(reads)))) as readers, \
            ThreadPoolExecutor(max_workers=sampler_count(len(samples), _open_files())) as samplers:
        futures = [readers.submit(job) for job in reads]
        futures += [samplers.submit(job) for job in samples]
        for future in futures:
            future.result()


def _open_files() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else SAMPLERS * FDS_PER_SAMPLE
