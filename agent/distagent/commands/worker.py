"""`run_worker`: one worker of a multi-worker job, start to final status.

Every worker runs the same `run_job`; TensorFlow's collectives keep them in step. What is added
here is the cluster (resolved before any other TensorFlow op), the translation of a lost peer
into one line naming it (exit code 1) instead of a gRPC traceback, a stop on SIGTERM that all
workers agree on (preempt.py), and a digest of this worker's copy of the trained weights,
printed at the end: workers in sync print the same digest.

Leaving in order: cluster/leave.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from distagent.cluster.faults import explain
from distagent.cluster.layout import in_slurm_step, resolve_layout
from distagent.cluster.leave import exit_in_order, leave_after_peers
from distagent.cluster.strategy import ClusterRequest
from distagent.schema import JobConfig
from distagent.train.preempt import Preemption
from distagent.train.signals import StopRequest
from distcore.textsafe import terminal_text

ERROR_LINE_LIMIT = 2000  # characters of the line, as the CLI's own error lines


@contextlib.contextmanager
def variables_made() -> Iterator[list[Any]]:
    """Every variable created inside, in creation order (this worker's copies)."""
    import tensorflow as tf

    made: list[Any] = []

    def record(next_creator: Any, **kwargs: Any) -> Any:
        variable = next_creator(**kwargs)
        made.append(variable)
        return variable

    with tf.variable_creator_scope(record):
        yield made


def weights_digest(variables: list[Any]) -> str:
    """sha256 over the trainable variables' values: equal on every worker that is in sync."""
    digest = hashlib.sha256()
    for variable in variables:
        if variable.trainable:
            digest.update(variable.numpy().tobytes())
    return digest.hexdigest()[:16]


def run_worker(
    cfg: JobConfig,
    *,
    run_dir: Path | None = None,
    task_index: int | None = None,
    progress: Any = None,
    stop: Any = None,
    exit_code: Any = None,
) -> str:
    """Train this worker's part of `cfg`; returns the final status (as `run_job` does).

    `exit_code(status)`: given, the process ends there with that code (`exit_in_order`)."""
    if not in_slurm_step(os.environ):
        # Pure outside an srun step: a missing or wrong cluster is one line before TensorFlow
        # loads (seconds sooner; a batch script without srun learns it at once).
        resolve_layout(cfg.cluster.workers, task_index, os.environ)
    import tensorflow as tf

    from distagent.train import run_job

    request = ClusterRequest(cfg.cluster, task_index=task_index)
    # The training iterator ends with the process (os._exit): ended before the leave barrier,
    # it kept the other workers waiting while tf.data's threads joined (2.3-9.8 s under load).
    kept: list[Any] = []
    try:
        stop = stop if stop is not None else StopRequest()
        with variables_made() as variables, Preemption(request, stop) as preemption:
            status = run_job(cfg, run_dir=run_dir, cluster=request, progress=progress, stop=stop,
                             make_step_hook=preemption.make_step_hook, retain=kept.append)
    except tf.errors.OpError as err:
        lost = explain(err, request.setup.layout) if request.setup is not None else None
        if lost is None:
            raise
        if exit_code is not None and request.setup is not None:
            # TensorFlow's teardown at exit waits on the coordination service, which a frozen
            # or lost chief never answers: say it in one line and leave now, as a hang does.
            print(terminal_text(f"distagent: {lost}", ERROR_LINE_LIMIT), file=sys.stderr,
                  flush=True)
            leave_after_peers(request.setup, lost.exit_code)
        raise lost from None
    if request.setup is not None:
        me = request.setup.layout.me.describe()
        print(f"{me}: {status}; weights digest {weights_digest(variables)}", file=sys.stderr)
        if exit_code is not None:
            exit_in_order(request.setup, int(exit_code(status)))
    return status
