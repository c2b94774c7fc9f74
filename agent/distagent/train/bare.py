"""A switch for benchmarks only: the job without its own instrumentation.

`DISTAGENT_BENCH_BARE=1` in a job's environment turns off what distagent adds to a training job
to watch it: the in-graph timestamps of every step (no input wait, compute or reduction times),
the heartbeat and its hang check, the ledger (no `time/` tags, no ledger file, no goodput) and
the system and GPU samplers. What is left is the training, its loss and metrics, checkpoints and
run.json. It exists so that bench/ledger.py can measure what all of that costs by running the
same job with and without it; a job run so cannot be judged by distmon (no hangs, no stragglers,
no ledger), so it is not a setting and no config key turns it on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any, Final

from distagent.train.ledger import AttemptClock

BARE_ENV: Final = "DISTAGENT_BENCH_BARE"


def is_bare(environ: Mapping[str, str] = os.environ) -> bool:
    """The switch is on: set, and neither empty nor "0"."""
    return environ.get(BARE_ENV, "").strip() not in ("", "0")


class IdleClock(AttemptClock):
    """A ledger that measures nothing: no switches, no file, no tags, no run.json fields."""

    def __init__(self) -> None:
        super().__init__(None, process_start=time.time())

    def switch(self, state: str | None) -> str | None:
        return None

    def steps_logged(self, wait_seconds: float) -> None:
        pass

    def checkpointed(self, step: int) -> None:
        pass

    def save(self, step: int | None = None) -> dict[str, Any]:
        return {}

    def scalars(self) -> dict[str, float]:
        return {}
