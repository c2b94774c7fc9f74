"""From the step's counters to the scalars a log point writes, and the writers that write them.

`interval_scalars` and `epoch_scalars` are pure: counters in, `{tag: value}` out, with a tag left
out when its value is unknown (no examples, no timed steps), never written as a fake zero.

Steps and values reach TensorFlow as numpy-backed tensors (`as_tensor`): a Python number handed
to an eager op is kept by TensorFlow (2.21) for the life of the process, so writing Python
floats grew the agent's memory with every log point (~6 KB each, without end).

A log point's scalars (`Writers.write_compiled`) are written by a thread of their own through a
bounded queue: the training thread hands them over and goes on, where the write itself was
seconds the ledger could name no bucket for. `flush` and `close` wait for every point handed
over, so nothing is lost at a job's end, on a stop or at a checkpoint (a resume never writes
the points up to it again); a full queue makes the training thread wait rather than drop one.
"""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distcore import names

METRIC_PREFIX = "metric:"
"""Counters named so are a metric's per-example sum (objective.metric_counter)."""


@dataclass(frozen=True)
class Timing:
    """Steps timed in a log interval (steps that traced a new graph are left out)."""

    steps: int
    wall_seconds: float
    wait_seconds: float
    compute_seconds: float | None = None
    """This worker's time to its gradients (input included), summed over the timed steps."""
    reduce_seconds: float | None = None
    """This worker's time in the gradient's reduction, summed over the timed steps."""


def _mean(total: float, count: float) -> float | None:
    return total / count if count > 0 else None


def interval_scalars(
    counters: Mapping[str, float], timing: Timing, *, global_batch_size: int, learning_rate: float,
    flops_per_step: float | None = None, peak_flops: float | None = None,
) -> dict[str, float]:
    """The training tags of one log point: means over the interval's steps. With the step's
    model FLOPs, their rate; with the replicas' peak FLOP/s too, the MFU."""
    out: dict[str, float | None] = {
        names.LOSS: _mean(counters["loss_sum"], counters["examples"]),
        **{tag: _mean(value, counters["examples"]) for tag, value in _metrics(counters)},
        names.LEARNING_RATE: learning_rate,
    }
    if timing.steps > 0 and timing.wall_seconds > 0:
        out[names.EXAMPLES_PER_SECOND] = timing.steps * global_batch_size / timing.wall_seconds
        out[names.STEP_TIME_MS] = 1000.0 * timing.wall_seconds / timing.steps
        if math.isfinite(timing.wait_seconds):  # NaN: the step was not timed inside
            out[names.INPUT_WAIT_MS] = 1000.0 * timing.wait_seconds / timing.steps
            out[names.INPUT_WAIT_FRACTION] = min(1.0, timing.wait_seconds / timing.wall_seconds)
        if flops_per_step:
            rate = timing.steps * flops_per_step / timing.wall_seconds
            out[names.MODEL_FLOPS_PER_SECOND] = rate
            out[names.MFU] = rate / peak_flops if peak_flops else None
        if timing.compute_seconds is not None and timing.reduce_seconds is not None:
            out[names.STEP_COMPUTE_SECONDS] = timing.compute_seconds / timing.steps
            out[names.REDUCE_WAIT_SECONDS] = timing.reduce_seconds / timing.steps
    return {tag: value for tag, value in out.items() if value is not None}


def _metrics(counters: Mapping[str, float]) -> list[tuple[str, float]]:
    """(tag, sum) of each metric counter ("metric:accuracy" -> "accuracy")."""
    return [(name.partition(":")[2], value) for name, value in counters.items()
            if name.startswith(METRIC_PREFIX)]


def epoch_scalars(sums: Mapping[str, float]) -> dict[str, float]:
    """The epoch's tags from its sums (loss, metrics, examples): epoch_loss, epoch_<metric>."""
    examples = sums["examples"]
    out = {names.EPOCH_LOSS: _mean(sums["loss_sum"], examples),
           **{f"epoch_{tag}": _mean(value, examples) for tag, value in _metrics(sums)}}
    return {tag: value for tag, value in out.items() if value is not None}


def as_tensor(value: float, dtype: str = "float32") -> Any:
    """`value` as a tensor made from a numpy array: TensorFlow keeps no Python object of it."""
    import numpy as np
    import tensorflow as tf

    return tf.constant(np.asarray(value, dtype))


def _path(variable: Any) -> str:
    """Keras 3 variables have a unique `path` ("dense/kernel"); tf.Variables a name ("x:0")."""
    path = getattr(variable, "path", None) or str(variable.name).split(":")[0]
    return str(path)


def is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


class Writers:
    """`train/` and `validation/` file writers, as Keras' TensorBoard callback lays them out."""

    def __init__(self, run_dir: Path, *, enabled: bool = True) -> None:
        self.run_dir = run_dir
        self.enabled = enabled  # False on non-chief workers
        self._writers: dict[str, Any] = {}
        self._made = threading.Lock()  # a writer per directory, whichever thread asks first
        self._histogram_fn: tuple[tuple[str, ...], Any] | None = None
        self._scalar_fns: dict[tuple[str, tuple[str, ...]], Any] = {}
        self._seen_tags: set[tuple[str, tuple[str, ...]]] = set()
        self._background: _Background | None = None

    def write(self, sub: str, step: int, scalars: Mapping[str, float]) -> None:
        if not self.enabled or not scalars:
            return
        import tensorflow as tf

        with self._writer(sub).as_default(step=as_tensor(step, "int64")):
            for tag, value in scalars.items():
                tf.summary.scalar(tag, as_tensor(value))

    def write_compiled(self, sub: str, step: int, scalars: Mapping[str, float]) -> None:
        """A log point's scalars, handed to the writing thread (see the module's text); an
        error of an earlier write is raised here, on the caller's thread."""
        if not self.enabled or not scalars:
            return
        if self._background is None:
            self._background = _Background(self._write_compiled)
        self._background.put((sub, step, dict(scalars)))

    def _write_compiled(self, sub: str, step: int, scalars: Mapping[str, float]) -> None:
        """`write` through one compiled function per set of tags: a log point's twenty
        scalars cost about a millisecond, where written one by one eagerly they took ten on a
        busy CPU. For the writes of every log point; a set of tags seen once (the first log
        point's, which has no timing yet) is written eagerly: a trace costs a few hundred ms."""
        import tensorflow as tf

        writer = self._writer(sub)
        tags = tuple(scalars)
        fn = self._scalar_fns.get((sub, tags))
        if fn is None and (sub, tags) not in self._seen_tags:
            self._seen_tags.add((sub, tags))
            self.write(sub, step, scalars)
            return
        if fn is None:

            def write_all(at: Any, values: Any) -> None:
                with writer.as_default(step=at):
                    for i, tag in enumerate(tags):
                        tf.summary.scalar(tag, values[i])

            fn = self._scalar_fns[(sub, tags)] = tf.function(write_all)
        fn(tf.constant(step, tf.int64), tf.constant(list(scalars.values()), tf.float32))

    def _writer(self, sub: str) -> Any:
        """`sub`'s writer, made on first use: a job without validation data leaves no empty
        validation run."""
        import tensorflow as tf

        with self._made:
            if sub not in self._writers:
                self._writers[sub] = tf.summary.create_file_writer(str(self.run_dir / sub))
            return self._writers[sub]

    def histograms(self, step: int, variables: Sequence[Any],
                   gradients: Sequence[Any] | None) -> None:
        """Each trainable variable's histogram (`weights/<path>`) and its last (applied)
        gradient's (`gradients/<path>`), into train/ with tf.summary.histogram (TensorBoard's
        30 buckets). Written by one compiled function per set of tags: eagerly, the dozens of
        small ops of each histogram cost about 40 ms apiece on a CPU."""
        if not self.enabled:
            return
        import tensorflow as tf

        values = [(f"weights/{_path(v)}", v) for v in variables]
        if gradients is not None:
            values += [(f"gradients/{_path(v)}", g)
                       for v, g in zip(variables, gradients, strict=True)]
        tags = tuple(tag for tag, _ in values)
        if self._histogram_fn is None or self._histogram_fn[0] != tags:
            writer = self._writer(names.TRAIN_DIR)

            def write_all(at: Any, tensors: list[Any]) -> None:
                with writer.as_default(step=at):
                    for tag, tensor in zip(tags, tensors, strict=True):
                        tf.summary.histogram(tag, tensor)

            self._histogram_fn = (tags, tf.function(write_all))
        self._histogram_fn[1](as_tensor(step, "int64"),
                              [tf.convert_to_tensor(v) for _, v in values])

    def flush(self) -> None:
        """Every point handed over written, and the files flushed."""
        if self._background is not None:
            self._background.drain()
        for writer in list(self._writers.values()):
            writer.flush()

    def close(self) -> None:
        """Every point handed over written, the thread ended and the files closed; an error of
        the thread's is raised once the files are closed."""
        background, self._background = self._background, None
        try:
            if background is not None:
                background.close()
        finally:
            for writer in self._writers.values():
                writer.close()
            self._writers.clear()
            self._histogram_fn = None
            self._scalar_fns.clear()
            self._seen_tags.clear()


QUEUE_POINTS = 64
"""Log points the writing thread may be behind by before the training thread waits for it."""

_Point = tuple[str, int, dict[str, float]]


class _Background:
    """One thread that writes the points `put` hands it, in order. Its first error is kept and
    raised on the caller's thread (at the next put, drain or close); the points after it are
    taken and dropped, so a caller never waits on a queue nobody empties."""

    def __init__(self, write: Any) -> None:
        self._write = write
        self._queue: queue.Queue[_Point | None] = queue.Queue(QUEUE_POINTS)
        self._error: BaseException | None = None
        # A daemon: a process that never closes its writers still exits.
        self._thread = threading.Thread(target=self._run, name="distagent-summaries",
                                        daemon=True)
        self._thread.start()

    def put(self, point: _Point) -> None:
        self._raise()
        self._queue.put(point)

    def drain(self) -> None:
        self._queue.join()
        self._raise()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self._raise()

    def _raise(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _run(self) -> None:
        failed = False
        while True:
            point = self._queue.get()
            try:
                if point is None:
                    return
                if not failed:
                    self._write(*point)
            except BaseException as err:  # handed to the caller, never lost with the thread
                failed, self._error = True, err
            finally:
                self._queue.task_done()
