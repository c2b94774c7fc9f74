"""When a worker is lost: name it, in one line, instead of a page of gRPC text or a hang.

TensorFlow aborts the collectives of every surviving worker when a peer dies (its heartbeat
stops, or its port refuses the next all-reduce). The error it raises names the peer somewhere in
several lines of gRPC detail; `explain` finds which workers it names, checks which peers still
accept a TCP connection, and says which worker was lost and what to do.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable

from distagent.cluster.layout import ClusterLayout, Task
from distcore.errors import DistmonError

PROBE_SECONDS = 2.0
_TASK_NAME = re.compile(r"/job:(\w+)/(?:replica:\d+/)?task:(\d+)")
# Words in TensorFlow's messages when a collective failed because of a peer.
_PEER_WORDS = ("collective", "unhealthy", "heartbeat", "failed to connect", "connection",
               "unavailable", "deadline", "timed out", "timeout", "aborted", "socket closed")
RESTART_HINT = ("every worker must be running; start the job again on all workers and it "
                "resumes from the last checkpoint")


class WorkerLostError(DistmonError):
    """A peer worker died or stopped answering: this worker cannot go on (exit 1)."""

    exit_code = 1


def named_tasks(message: str, layout: ClusterLayout) -> list[Task]:
    """Peers that TensorFlow's message names, in rank order."""
    named = {(job, int(index)) for job, index in _TASK_NAME.findall(message)}
    return [t for t in layout.peers() if (t.task_type, t.index) in named]


def is_reachable(address: str, timeout: float = PROBE_SECONDS) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def _service_host(message: str, layout: ClusterLayout) -> list[Task]:
    """The chief, where a call to the coordination service it hosts failed: a chief that is
    frozen (stopped, swapping) still accepts connections, so no probe finds it."""
    if layout.is_chief or "coordinationservice" not in message.lower():
        return []
    return [t for t in layout.peers() if t.rank == 0]


def unreachable_peers(layout: ClusterLayout) -> list[Task]:
    return [t for t in layout.peers() if not is_reachable(t.address)]


def first_line(message: str, limit: int = 160) -> str:
    """TensorFlow's reason without its gRPC payloads and node names."""
    for line in message.splitlines():
        line = line.strip()
        if line and not line.startswith(("Graph execution error", "Detected at node", "File ")):
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def _union(*groups: Iterable[Task]) -> list[Task]:
    seen: dict[int, Task] = {}
    for group in groups:
        for task in group:
            seen.setdefault(task.rank, task)
    return [seen[r] for r in sorted(seen)]


def explain(err: BaseException, layout: ClusterLayout) -> WorkerLostError | None:
    """A WorkerLostError naming the lost worker(s), or None when `err` is not about a peer."""
    message = str(getattr(err, "message", None) or err)
    lost = _union(unreachable_peers(layout), named_tasks(message, layout),
                  _service_host(message, layout))
    if not lost and not any(w in message.lower() for w in _PEER_WORDS):
        return None
    who = ", ".join(t.describe() for t in lost) if lost else "a peer worker (could not tell which)"
    return WorkerLostError(
        f"{layout.me.describe()}: lost {who}: {first_line(message)}; {RESTART_HINT}"
    )


def explain_startup_failure(err: BaseException, layout: ClusterLayout,
                            timeout_seconds: float) -> DistmonError:
    """Creating the strategy failed: usually a worker that never came up within the timeout."""
    missing = unreachable_peers(layout)
    if missing:
        return WorkerLostError(
            f"{layout.me.describe()}: {', '.join(t.describe() for t in missing)} did not join "
            f"within {timeout_seconds:g} s: {first_line(str(err))}"
        )
    return explain(err, layout) or WorkerLostError(
        f"{layout.me.describe()}: could not join the cluster: {first_line(str(err))}"
    )
