"""Training runs: the loop, its measurements, the run directory, checkpoints and signals.

`run_job` is imported on first use, so that `distagent status` and `stop` (which need only
`distagent.train.rundir`) never load TensorFlow.
"""

from __future__ import annotations

from typing import Any


def run_job(cfg: Any, **kwargs: Any) -> str:
    """See `distagent.train.job.run_job`."""
    from distagent.train.job import run_job as _run_job

    return _run_job(cfg, **kwargs)
