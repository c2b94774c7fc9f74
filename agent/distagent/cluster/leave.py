"""How the workers of a job leave: every worker once all are done, the chief last.

`exit_in_order` (for `distagent start`): once every worker is done (a last barrier of
the coordination service: the chief has written its checkpoint and run.json), the other workers
exit at once, then the chief, which hosts the coordination service, once their ports have
closed. TensorFlow's own teardown at interpreter exit (its shutdown barrier, the gRPC server,
the runtime's destructors) took 2-5 s per worker on a loaded machine, and a chief that left
first made the others print the service's errors (E0000 ... coordination service) while they
waited for it: so each worker ends with `os._exit`, everything it wrote already flushed and
closed.

`leave_after_peers` is the chief-last half alone, for a worker that leaves without the barrier
(a hang abort). Imports no training code, so train/ may call it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

from distagent.cluster.faults import is_reachable
from distagent.cluster.strategy import ClusterSetup

LEAVE_BARRIER = "distagent-leave"
CHIEF_LEAVE_SECONDS = 5.0
"""How long the chief waits for the other workers' ports to close before it exits anyway."""


def exit_in_order(setup: ClusterSetup, code: int) -> None:
    """End the process with `code` after every worker is done: the chief last (never returns)."""
    from tensorflow.python.eager import context

    sys.stdout.flush()
    sys.stderr.flush()
    # A barrier that fails (a peer already gone) has nothing left to wait for: leave anyway.
    with contextlib.suppress(Exception):
        context.context().wait_at_barrier(LEAVE_BARRIER, int(setup.timeout_seconds * 1000))
    leave_after_peers(setup, code)


def leave_after_peers(setup: ClusterSetup, code: int) -> None:
    """End the process with `code`; the chief, which hosts the coordination service, only once
    the other workers' ports have closed (or after CHIEF_LEAVE_SECONDS). Never returns."""
    if setup.is_chief:
        peers = list(setup.layout.peers())
        deadline = time.monotonic() + CHIEF_LEAVE_SECONDS
        while peers and time.monotonic() < deadline:
            peers = [p for p in peers if is_reachable(p.address, timeout=0.5)]
            if peers:
                time.sleep(0.05)
    os._exit(code)
