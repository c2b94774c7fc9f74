"""Where this worker's step stands, read while the step runs: computing or in the reduction.

The compiled step keeps two host variables (steps.TrainState): `reduced`, the last step whose
reduction ended, and `reached`, the step whose gradients this worker holds (assigned as soon as
its gradients exist, before the cross-replica reduction). Variables can be read from another
thread while the step runs, so a hung job tells apart the worker that never reached the
reduction (`reached == reduced`: still computing, or stuck in its input or model) from those
waiting in it for that worker (`reached == reduced + 1`).

The read runs in its own thread: should TensorFlow ever block it, the heartbeat still beats
and says when the phase was last read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

PHASE_COMPUTING = "computing"
PHASE_REDUCING = "reducing"


def phase_of(step: int, reached: int) -> str:
    """`reducing` once this worker holds the next step's gradients, else `computing`."""
    return PHASE_REDUCING if reached > step else PHASE_COMPUTING


class PhaseProbe:
    """Reads (step, reached) every `interval` seconds; `latest()` never waits for a read."""

    def __init__(self, read: Callable[[], tuple[int, int]], interval: float = 1.0) -> None:
        self._read = read
        self._interval = interval
        self._latest: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="distagent-phase-probe",
                                        daemon=True)

    def latest(self) -> dict[str, Any]:
        return dict(self._latest)

    def _run(self) -> None:
        while True:
            try:
                step, reached = self._read()
            except Exception:  # the job is ending (variables gone): nothing more to read
                return
            self._latest = {"reached": reached, "phase": phase_of(step, reached),
                            "phase_time": time.time()}
            if self._stop.wait(self._interval):
                return

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        # A read blocked inside TensorFlow must not hold the job's end: the thread is a daemon.
        self._thread.join(timeout=self._interval + 1.0)
