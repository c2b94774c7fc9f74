"""`--once` over many ssh hosts: every host's GPU sample waits at once (dmon's GPM answer takes
a tick or two on each), not in turns of the logdir readers' pool."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from distcore.remote import RemoteProducers
from distcore.remote.wiring import READERS, SAMPLERS, sampler_count, scan_remote_once


class Waiting:
    """A source whose read or sample returns only once `barrier`'s every party is waiting: a
    pool that ran fewer at once would break the barrier (its timeout) instead."""

    def __init__(self, barrier: threading.Barrier) -> None:
        self.barrier = barrier
        self.done = False

    def _wait(self) -> None:
        self.barrier.wait()
        self.done = True

    scan_once = sample_once = _wait


@pytest.mark.parametrize(("readers", "samplers"), [(0, READERS + 8), (3, 100), (READERS, 1)])
def test_every_host_sample_and_up_to_the_readers_bound_wait_at_once(readers: int,
                                                                    samplers: int) -> None:
    assert samplers <= SAMPLERS
    sample_barrier = threading.Barrier(samplers, timeout=60)
    read_barrier = threading.Barrier(max(readers, 1), timeout=60)
    reads = [Waiting(read_barrier) for _ in range(readers)]
    samples = [Waiting(sample_barrier) for _ in range(samplers)]
    remote = RemoteProducers(producers=cast(Any, tuple(reads)),
                             host_sources=cast(Any, tuple(samples)))
    scan_remote_once(remote)
    assert all(source.done for source in [*reads, *samples])


@pytest.mark.parametrize(("hosts", "open_files", "count"), [
    (200, 1 << 20, SAMPLERS),  # a generous limit: the pool's own bound
    (100, 1024, 64),  # the common default limit
    (40, 1024, 40),
    (0, 1024, 1),
    (100, 20, 1),  # a tiny limit still samples, one host at a time
])
def test_samplers_are_bounded_by_the_open_file_limit(hosts: int, open_files: int,
                                                     count: int) -> None:
    assert sampler_count(hosts, open_files) == count
