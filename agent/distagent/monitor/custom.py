"""`monitor.run`: a custom training loop, recorded as a distagent job.

    with monitor.run(logdir, strategy=strategy) as run:
        for batch in run.iterate(dist_dataset):     # times each get-next: the input wait
            loss = train_step(batch)
            run.step(loss=loss)                      # the step's end

Straggler timing needs the moment this worker holds its gradients: a loop that computes them
and applies them in two calls marks it between, `run.phase("reduce")`.
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from collections.abc import Iterable, Iterator
from typing import Any

from distagent.monitor.session import MonitorError, Session, error_line
from distcore import names

PHASES = ("reduce",)


class Stopped(BaseException):
    """Raised from `run.step` after SIGTERM or SIGINT: unwinds the user's loop to `monitor.run`,
    which ends the run `stopped` and lets the script go on after its `with` block. A
    BaseException, so that the loop's own `except Exception` does not swallow it."""


class Run:
    """What `monitor.run` yields: `iterate`, `phase` and `step`."""

    def __init__(self, session: Session) -> None:
        self._session = session

    @property
    def run_dir(self) -> Any:
        return self._session.run_dir

    @property
    def stop_requested(self) -> bool:
        """SIGTERM or SIGINT arrived; the next `step` raises `Stopped`."""
        return self._session.stop.requested

    def iterate(self, dataset: Iterable[Any]) -> Iterator[Any]:
        """Each element of `dataset` (a tf.data dataset, a distributed one, any iterable),
        with the time this step waited for it counted as its input wait."""
        session = self._session
        iterator = iter(dataset)
        while True:
            session.step_began()
            start = time.perf_counter()
            try:
                element = next(iterator)
            except StopIteration:
                session.loop_left()
                return
            session.waited(time.perf_counter() - start)
            try:
                yield element
            except GeneratorExit:  # the loop broke off: what follows is not a step's
                session.loop_left()
                raise

    def phase(self, name: str) -> None:
        """`"reduce"`: this worker holds the step's gradients and enters their reduction."""
        if name not in PHASES:
            raise MonitorError(f"unknown phase {name!r} (known: {', '.join(PHASES)})")
        self._session.reducing()

    def count_flops(self, model: Any, input_shape: Any) -> None:
        """MFU from now on: the model's traced FLOPs (one example of `input_shape`, without
        the batch) × 3 × `global_batch_size` (an option), against the devices' peak."""
        import tensorflow as tf

        on_gpu = bool(tf.config.list_logical_devices("GPU"))
        self._session.count_flops(model, input_shape, on_gpu=on_gpu)

    def step(self, loss: Any = None, **scalars: Any) -> None:
        """The step ended; `loss` (a number or a scalar tensor, read at log points) and any
        other scalars, written as `train/<name>` when this step is a log point."""
        session = self._session
        logged = session.logged_step
        session.step_ended(loss)
        if scalars and session.logged_step != logged:
            session.writers.write(names.TRAIN_DIR, session.step,
                                  {k: float(v) for k, v in scalars.items()})
        if session.stop.requested:
            raise Stopped(session.stop.signal_name)


@contextlib.contextmanager
def run(logdir: str | os.PathLike[str], name: str | None = None, strategy: Any = None,
        **options: Any) -> Iterator[Run]:
    """Record the loop in the block as a run in `<logdir>/<name>` (see the module's docstring).
    Raises MonitorError before the block when the logdir cannot be written or an option is
    wrong. The run ends `finished` when the block ends, `failed` with the error when it
    raises (the exception goes on), `stopped` after SIGTERM or SIGINT."""
    session = Session(logdir, name, strategy, options, source="monitor.run")
    session.start()
    try:
        yield Run(session)
    except Stopped:
        session.log()
        session.end(names.STATUS_STOPPED, message=f"stopped by {session.stop.signal_name}")
    except BaseException as err:
        session.end(names.STATUS_FAILED, error=error_line(err), trace=traceback.format_exc())
        raise
    else:
        session.log()
        session.end(names.STATUS_FINISHED)

