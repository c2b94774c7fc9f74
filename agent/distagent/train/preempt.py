"""SIGTERM on any worker: every worker stops at the same step, after a checkpoint.

A worker that stopped alone would leave the others blocked in the next all-reduce. TensorFlow's
`PreemptionCheckpointHandler` solves this: the signalled worker tells the others (through the
coordination service) after which call to stop and waits until each has acknowledged; at that
call every worker saves a checkpoint (all take part; only the chief's is kept) and calls the
handler's `exit_fn`. It must be consulted after every compiled call on every worker: that is
`run_job`'s `make_step_hook` seam. Our `exit_fn` does not exit: it asks the training loop to
stop at this boundary, so the run ends with status `stopped` and exit code 0.

The handler's watcher thread waits on the coordination service, which the chief serves: when
the chief dies, the wait fails in that thread and Python printed its traceback beside the
worker's own one-line error. Once a job has made a handler, that failure is one line instead,
for the rest of the process (the thread may fail while the worker is already leaving).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from distagent.train.signals import StopRequest

StepHook = Callable[[int], None]
WATCHER_THREAD = "PeerTerminationWatcher"  # TensorFlow's name for it, "-<worker id>" after


def watcher_failure_line(args: threading.ExceptHookArgs) -> str | None:
    """The one line for an exception ending TensorFlow's watcher thread; None for another
    thread's (left to the usual hook)."""
    if args.thread is None or not args.thread.name.startswith(WATCHER_THREAD):
        return None
    from distagent.cluster.faults import first_line

    reason = first_line(str(args.exc_value)) if args.exc_value is not None else ""
    return (f"distagent: the preemption watcher stopped (the chief's coordination service is "
            f"gone): {reason or args.exc_type.__name__}")


def quiet_watcher_failures() -> None:
    """threading.excepthook says `watcher_failure_line` for the watcher thread, and passes
    every other thread's exception on to the hook it replaced. Once per process."""
    previous = threading.excepthook
    if getattr(previous, "_distagent_watcher", False):
        return

    def hook(args: threading.ExceptHookArgs) -> None:
        line = watcher_failure_line(args)
        if line is None:
            previous(args)
        else:
            print(line, file=sys.stderr, flush=True)

    hook._distagent_watcher = True  # type: ignore[attr-defined]
    threading.excepthook = hook


STOP_SECONDS = 5.0  # how long closing waits for the preemption watcher to stop


class Preemption:
    """Builds the step hook once the job's checkpointer exists; `close()` ends its thread."""

    def __init__(self, cluster: Any, stop: StopRequest) -> None:
        self._cluster = cluster  # a ClusterRequest, resolved by the time the hook is made
        self._stop = stop
        self._handler: Any = None

    def make_step_hook(self, checkpointer: Any) -> StepHook:
        setup = getattr(self._cluster, "setup", None)
        if setup is None or setup.num_workers <= 1:
            return lambda step: None
        import tensorflow as tf

        saved_at: list[int] = []

        def stop_here() -> None:
            step = saved_at[-1]
            checkpointer.last_saved_step = step  # the handler saved this step: not twice
            if not setup.is_chief:  # only the chief's checkpoint is kept
                shutil.rmtree(Path(checkpointer.manager.directory), ignore_errors=True)
            self._stop.request("SIGTERM or SIGINT on a worker")

        quiet_watcher_failures()
        config = tf.distribute.experimental.TerminationConfig(exit_fn=stop_here)
        self._handler = tf.distribute.experimental.PreemptionCheckpointHandler(
            setup.strategy.cluster_resolver, checkpointer.manager, termination_config=config
        )
        if threading.current_thread() is threading.main_thread():
            # Ctrl-C as well: a worker stopping alone would leave the others blocked. (The
            # StopRequest restores the previous SIGINT handler when the job ends.)
            signal.signal(signal.SIGINT, self._handler._sigterm_handler_fn)

        from tensorflow.python.util import deprecation

        def hook(step: int) -> None:
            saved_at.append(step)
            del saved_at[:-1]
            # The handler's own save reads its deprecated `total_run_calls`: without this,
            # every SIGTERM stop prints TensorFlow's deprecation warning twice per worker.
            with deprecation.silence():
                self._handler.save_checkpoint_if_preempted(checkpoint_number=step)

        return hook

    def close(self) -> None:
        """What the handler's __del__ does, now: its watcher thread must not outlive the job.
        Stopping it writes a key to the coordination service, which a frozen or lost chief
        never answers: done on a daemon thread and waited for at most STOP_SECONDS, so a job
        that lost its chief still ends (the process leaves with os._exit either way)."""
        handler, self._handler = self._handler, None
        if handler is None:
            return

        def stop() -> None:
            with contextlib.suppress(Exception):
                handler._stop_cluster_wise_termination_watcher_thread()

        stopping = threading.Thread(target=stop, name="distagent-preemption-stop", daemon=True)
        stopping.start()
        stopping.join(STOP_SECONDS)

    def __enter__(self) -> Preemption:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
