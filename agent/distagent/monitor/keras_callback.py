"""`monitor.KerasCallback`: `model.fit`, recorded as a distagent job.

How the input wait is measured: Keras 3 takes each batch inside its compiled train function,
where no callback hook can see it. The callback, at `on_train_begin`, puts its own function in
front of the model's `train_function`: it takes each batch from fit's iterator itself, timing
that get-next on the host (the time the step waited for its input), and hands it to the model's
own compiled one-step function (Keras' path for an iterator that is not a tf.data one: the
same compiled step, the same batches in the same order, so the same losses). Nothing is
estimated: a fit this cannot wrap (another backend, a Keras without that path) reports no input
wait at all.

A failure inside a step ends the run `failed` there; one elsewhere in the script (another
callback, the code after fit) through `sys.excepthook`, and a script that ends with the run
still open ends it `failed` at exit, saying so.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import Any

import keras

from distagent.monitor.session import Session, error_line
from distagent.train.ledger import STEPS
from distcore import names

_WRAPPED = "_distagent_monitor_inner"


class KerasCallback(keras.callbacks.Callback):
    """`model.fit(..., callbacks=[monitor.KerasCallback(logdir)])`; see the module's docstring.
    Raises MonitorError here, before training, when the logdir cannot be written."""

    def __init__(self, logdir: str | os.PathLike[str], name: str | None = None,
                 **options: Any) -> None:
        super().__init__()
        self._args = (logdir, name, dict(options))
        # Made here to check the logdir and options before training; fit makes the one it
        # records, with its model's strategy.
        self._session: Session | None = Session(logdir, name, None, options,
                                                source="monitor.KerasCallback")
        self._started = False
        self._previous_hook: Callable[..., Any] | None = None
        self.input_wait_measured = False

    @property
    def run_dir(self) -> Any:
        return self._session.run_dir if self._session is not None else None

    # fit's hooks

    def on_train_begin(self, logs: Any = None) -> None:
        logdir, name, options = self._args
        self._session = Session(logdir, name, self.model.distribute_strategy, options,
                                source="monitor.KerasCallback")
        session = self._session
        session.start()
        self._started = True
        params = self.params or {}
        epochs, steps = params.get("epochs"), params.get("steps")
        if isinstance(epochs, int) and isinstance(steps, int):
            session.set_total_steps(epochs * steps)
        self._install_hooks()
        self.input_wait_measured = self._wrap_train_function()

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        if self._session is not None:
            self._session.step_began()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        session = self._session
        if session is None:
            return
        session.step_ended((logs or {}).get("loss"))
        if session.step == 1 and session.batch_source is not None:
            self._count_from_first_step(session)
        if session.stop.requested:
            self.model.stop_training = True

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        """Between epochs (fit's epoch-end work, the next epoch's iterator): not the steps'."""
        if self._session is not None and self._started and self._session.ended is None:
            self._session.loop_left(None)

    def on_test_begin(self, logs: Any = None) -> None:
        if self._session is not None and self._started:
            self._session.log()
            self._session.clock.switch("evaluation")

    def on_test_end(self, logs: Any = None) -> None:
        session = self._session
        if session is None or not self._started:
            return
        session.clock.switch(STEPS)
        session.restart_interval()
        if logs:
            session.writers.write(names.VALIDATION_DIR, session.step,
                                  {k: float(v) for k, v in logs.items() if k == "loss"})

    def on_train_end(self, logs: Any = None) -> None:
        session = self._session
        if session is None or session.ended is not None:
            return
        self._unwrap_train_function()
        session.log()
        if session.stop.requested:
            session.end(names.STATUS_STOPPED, message=f"stopped by {session.stop.signal_name}")
        else:
            session.end(names.STATUS_FINISHED)
        self._remove_hooks()

    def _count_from_first_step(self, session: Session) -> None:
        """The global batch (the in-graph step's count) and the model's FLOPs, once."""
        import tensorflow as tf

        assert session.batch_source is not None
        examples = session.batch_source()
        if examples > 0:
            session.set_batch(examples)
        try:
            input_shape: Any = tuple(self.model.inputs[0].shape[1:])
        except (AttributeError, IndexError, TypeError, ValueError):
            input_shape = None  # a subclassed model without inputs: no MFU
        on_gpu = bool(tf.config.list_logical_devices("GPU"))
        session.count_flops(self.model, input_shape, on_gpu=on_gpu)

    # The step's own wrapper

    def _wrap_train_function(self) -> bool:
        model, session = self.model, self._session
        inner = getattr(model, "train_function", None)
        if inner is None or session is None or keras.backend.backend() != "tensorflow":
            return False
        inner = getattr(inner, _WRAPPED, inner)  # a fit that raised left ours in place
        timed = _in_graph_step(model, session) if model.steps_per_execution == 1 else None
        first = [True]

        def timed_train_function(iterator: Any) -> Any:
            try:
                if timed is not None and _is_tf_iterator(iterator):
                    return timed(iterator)
                return inner(_TimedIterator(iterator, session, model, first))
            except StopIteration:
                raise
            except Exception as err:
                import tensorflow as tf

                if not isinstance(err, tf.errors.OutOfRangeError):
                    self._failed(err)
                raise

        setattr(timed_train_function, _WRAPPED, inner)
        model.train_function = timed_train_function
        return True

    def _unwrap_train_function(self) -> None:
        fn = getattr(self.model, "train_function", None)
        if fn is not None and hasattr(fn, _WRAPPED):
            self.model.train_function = getattr(fn, _WRAPPED)

    # Failures outside the step

    def _failed(self, err: BaseException, trace: str | None = None) -> None:
        session = self._session
        if session is not None and session.ended is None and self._started:
            session.end(names.STATUS_FAILED, error=error_line(err),
                        trace=trace or traceback.format_exc())
            self._remove_hooks()

    def _install_hooks(self) -> None:
        self._previous_hook = sys.excepthook
        sys.excepthook = self._excepthook
        atexit.register(self._at_exit)

    def _remove_hooks(self) -> None:
        if sys.excepthook == self._excepthook and self._previous_hook is not None:
            sys.excepthook = self._previous_hook
        atexit.unregister(self._at_exit)

    def _excepthook(self, kind: type[BaseException], err: BaseException,
                    tb: TracebackType | None) -> None:
        self._failed(err, "".join(traceback.format_exception(kind, err, tb)))
        (self._previous_hook or sys.__excepthook__)(kind, err, tb)

    def _at_exit(self) -> None:
        session = self._session
        if session is not None and session.ended is None:
            session.end(names.STATUS_FAILED, error="the script ended while fit was training")


def _is_tf_iterator(iterator: Any) -> bool:
    import tensorflow as tf

    return isinstance(iterator, tf.data.Iterator | tf.distribute.DistributedIterator)


def _in_graph_step(model: Any, session: Session) -> Callable[[Any], Any] | None:
    """fit's one step, as Keras compiles it (the model's `train_step` in `strategy.run`, its
    outputs reduced as Keras reduces them, with the model's `jit_compile`), inside a function
    that times its get-next in the graph, as distagent's own step does (train/steps.py): `t0`,
    the get-next after it, `t1` after every replica's part of the batch exists. The waits add up
    in a variable the session reads at log points. None where this Keras lacks the pieces
    (then the callback times the get-next on the host, `_TimedIterator`)."""
    import tensorflow as tf

    try:
        from keras.src.backend.tensorflow.trainer import reduce_per_replica
    except ImportError:
        return None
    from distagent.train.steps import _flat_local_tensors

    strategy = model.distribute_strategy
    wait = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="monitor_input_wait")
    batch = tf.Variable(0, dtype=tf.int64, trainable=False, name="monitor_batch")

    def one_step(data: Any) -> Any:
        outputs = strategy.run(model.train_step, args=(data,))
        return reduce_per_replica(outputs, strategy, reduction="auto")

    compiled = tf.function(one_step, reduce_retracing=True, jit_compile=model.jit_compile)

    @tf.function(reduce_retracing=True)
    def timed(iterator: Any) -> Any:
        t0 = tf.timestamp()
        with tf.control_dependencies([t0]):
            data = iterator.get_next()
        with tf.control_dependencies(_flat_local_tensors(strategy, data)):
            t1 = tf.timestamp()
        wait.assign_add(t1 - t0)
        leaves = tf.nest.flatten(data)
        parts = strategy.experimental_local_results(leaves[0]) if leaves else ()
        if parts and parts[0].shape.rank:  # this worker's examples: its replicas' parts
            batch.assign(tf.cast(tf.add_n([tf.shape(t)[0] for t in parts]), tf.int64))
        return compiled(data)

    read = [0.0]  # the sum at the last reading: reading costs one op, not a read and a reset

    def read_wait() -> float:
        total = float(wait.read_value())
        seconds, read[0] = total - read[0], total
        return seconds

    session.wait_source = read_wait
    session.batch_source = lambda: int(batch.read_value()) * session.where.workers
    return timed


class _TimedIterator:
    """fit's iterator, one batch at a time, each get-next timed as the step's input wait."""

    def __init__(self, iterator: Any, session: Session, model: Any, first: list[bool]) -> None:
        self._iterator, self._session, self._model, self._first = iterator, session, model, first

    def __iter__(self) -> _TimedIterator:
        return self

    def __next__(self) -> Any:
        start = time.perf_counter()
        data = next(self._iterator)
        self._session.waited(time.perf_counter() - start)
        if self._first[0]:
            self._first[0] = False
            _count(self._session, self._model, data)
        return data


def _count(session: Session, model: Any, data: Any) -> None:
    """The global batch and the model's FLOPs, from the first batch (this worker's share ×
    the workers)."""
    import tensorflow as tf

    strategy = model.distribute_strategy
    leaves = tf.nest.flatten(data, expand_composites=False)
    if not leaves:
        return
    local = strategy.experimental_local_results(leaves[0])
    shapes = [tuple(t.shape) for t in local if len(t.shape) > 0]
    if not shapes or shapes[0][0] is None:
        return
    session.set_batch(sum(int(s[0]) for s in shapes) * session.where.workers)
    on_gpu = bool(tf.config.list_logical_devices("GPU"))
    session.count_flops(model, shapes[0][1:], on_gpu=on_gpu)
