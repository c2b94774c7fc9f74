"""One monitored run of a user's own script: what a distagent job writes, with the job's writers.

`Session` owns the run directory `<logdir>/<name>`: run.json (train/rundir.RunRecord), the
ledger (train/ledger.AttemptClock), this worker's heartbeat and hang check (train/heartbeat),
the TensorBoard scalars (train/summaries.Writers, into `<run_dir>/train`, beside a `train/`
the user's own TensorBoard callback writes into `<logdir>`), the system and GPU samples
(system_record.SystemRecorder), and SIGTERM/SIGINT (train/signals.StopRequest). The front ends
(custom.py for loops, keras_callback.py for `fit`) say when a step begins, how long it waited
for its input, when it entered the reduction and when it ended; the session turns that into
the log points distagent's loop writes.

Timing is the host's, per step: the wall time between step ends, and the input wait the front
end measured around the get-next. The first step is left out of the timing (it traces and
compiles); it ends the ledger's start-up.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from distagent.train.heartbeat import HangSettings, Heartbeat
from distagent.train.ledger import STEPS, AttemptClock, process_start_time, worker_ledger_path
from distagent.train.phases import PhaseProbe
from distagent.train.rundir import RunRecord, process_identity, threads_now
from distagent.train.signals import StopRequest
from distagent.train.summaries import Timing, Writers, interval_scalars
from distcore import names
from distcore.errors import DistmonError


class MonitorError(DistmonError):
    """The monitor cannot record this run (its logdir, its options): raised before training."""


@dataclass(frozen=True)
class Options:
    """The `**options` of `monitor.run` and `monitor.KerasCallback`."""

    log_every: int = 10
    """Steps per log point (scalars, run.json, the ledger)..."""
    log_seconds: float = 1.0
    """...and at least this long after the last one: a log point's writes cost a few
    milliseconds, a fraction of a percent of any step once a second (0: by steps only)."""
    total_steps: int | None = None
    """The steps planned, for distmon's progress (Keras: from `fit`'s epochs and steps)."""
    global_batch_size: int | None = None
    """Examples per step, for examples/s and MFU (Keras: read from the first batch)."""
    flops_per_step: float | None = None
    """Model FLOPs of one training step; else counted from the model where one is known."""
    peak_tflops: float = 0.0
    """One device's peak, for MFU; 0: the datasheet (GPUs) or a measured matmul (CPU)."""
    hang_seconds: str | float = "auto"
    telemetry_seconds: float = 5.0
    simulate_gpus: int = 0


def parse_options(given: Mapping[str, Any]) -> Options:
    known = {f.name for f in fields(Options)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise MonitorError(f"unknown monitor option {unknown[0]!r} (known: "
                           f"{', '.join(sorted(known))})")
    options = Options(**given)
    if not isinstance(options.log_every, int) or options.log_every < 1:
        raise MonitorError(f"log_every must be a whole number of steps >= 1, "
                           f"not {options.log_every!r}")
    if not isinstance(options.log_seconds, int | float) or not options.log_seconds >= 0:
        raise MonitorError(f"log_seconds must be seconds >= 0, not {options.log_seconds!r}")
    hang = options.hang_seconds
    if hang != "auto" and not (isinstance(hang, int | float) and hang > 0):
        raise MonitorError(f"hang_seconds must be \"auto\" or seconds > 0, not {hang!r}")
    return options


def checked_run_dir(logdir: str | os.PathLike[str], name: str) -> Path:
    """`<logdir>/<name>`, made and proven writable; MonitorError (one line) otherwise."""
    if not name or name in (".", "..") or "/" in name or "\x00" in name:
        raise MonitorError(f"run name {name!r}: a plain directory name, please")
    root = Path(logdir)
    if root.exists() and not root.is_dir():
        raise MonitorError(f"logdir {root}: not a directory")
    run_dir = root / name
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=run_dir):
            pass
    except OSError as err:
        raise MonitorError(f"logdir {root}: cannot write there "
                           f"({err.strerror or type(err).__name__})") from None
    return run_dir


def default_name() -> str:
    """The script's name without its suffix (`train.py` -> `train`), else `run`."""
    stem = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else ""
    return stem if stem and stem not in ("-c", "-m", "") else "run"


@dataclass(frozen=True)
class Placement:
    """Who this process is in the job: worker index, workers, replicas."""

    worker: int = 0
    workers: int = 1
    replicas: int = 1

    @property
    def is_chief(self) -> bool:
        return self.worker == 0


def placement(strategy: Any) -> Placement:
    """From a tf.distribute strategy (None: one worker, one replica). A multi-worker
    strategy's cluster resolver says the task; a `chief` task counts as worker 0."""
    if strategy is None:
        return Placement()
    replicas = int(getattr(strategy, "num_replicas_in_sync", 1) or 1)
    resolver = getattr(strategy, "cluster_resolver", None)
    try:
        spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    except Exception:  # a resolver without a cluster: one worker
        spec = {}
    chiefs = len(spec.get("chief", []))
    workers = chiefs + len(spec.get("worker", []))
    if workers <= 1:
        return Placement(replicas=replicas)
    kind, task = getattr(resolver, "task_type", "worker"), int(getattr(resolver, "task_id", 0))
    index = task if kind == "chief" else task + chiefs
    return Placement(worker=index, workers=workers, replicas=replicas)


class _Interval:
    """The timed steps since the last log point, on the host's clock."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.steps = 0
        self.wait = 0.0
        self.compute = 0.0
        self.reduce = 0.0
        self.phased = 0  # steps that marked their reduction
        self.losses: list[Any] = []


class Session:
    """A monitored run; `start()` before the first step, `end(status, ...)` on every exit."""

    def __init__(self, logdir: str | os.PathLike[str], name: str | None, strategy: Any,
                 options: Mapping[str, Any], *, source: str) -> None:
        self.entered = time.time()
        self.options = parse_options(options)
        self.name = name if name is not None else default_name()
        self.run_dir = checked_run_dir(logdir, self.name)
        self.where = placement(strategy)
        self.source = source
        self.step = 0
        self.reached = 0
        self.logged_step = 0
        self.ended: str | None = None
        self.flops_per_step = self.options.flops_per_step
        self.peak_flops: float | None = None
        self.stop = StopRequest()
        self._interval: _Interval | None = None
        self.wait_source: Callable[[], float] | None = None
        """Given (fit's in-graph timing), the input wait summed since the last call."""
        self.batch_source: Callable[[], int] | None = None
        """Given, the global batch the last step took."""
        self._step_start = 0.0
        self._phase_at: float | None = None

    def start(self) -> None:
        from distagent.system_record import SystemRecorder

        where, run_dir = self.where, self.run_dir
        now = time.time()
        self.record = RunRecord(run_dir, {
            "first_start_time": now, "start_time": now, "end_time": None, **process_identity(),
            "run_dir": str(run_dir.resolve()), "name": self.name, "source": self.source,
            "script": sys.argv[0] if sys.argv else None, "status": names.STATUS_RUNNING,
            "plan": {"replicas": where.replicas, "workers": where.workers,
                     "global_batch_size": self.options.global_batch_size},
            "last_step": None, "total_steps": self.options.total_steps, "metrics": {},
            "error": None, "error_step": None, "message": None,
        }, enabled=where.is_chief, at_write=threads_now)
        self.clock = AttemptClock(None, process_start=max(process_start_time(), self.entered),
                                  path=worker_ledger_path(run_dir, where.worker))
        self.writers = Writers(run_dir, enabled=where.is_chief)
        several = where.workers > 1
        self.system = SystemRecorder(
            run_dir, interval=self.options.telemetry_seconds, pids=[os.getpid()],
            subdir=names.worker_system_dir(where.worker) if several else names.SYSTEM_DIR,
            simulate_gpus=self.options.simulate_gpus, worker=where.worker if several else None)
        self.heartbeat = Heartbeat(
            run_dir, worker=where.worker, workers=where.workers,
            settings=HangSettings(hang_seconds=self.options.hang_seconds),
            probe=PhaseProbe(lambda: (self.step, self.reached)), is_chief=where.is_chief,
            publish=lambda workers: self.record.update(workers=workers))
        self.record.update(last_step=0, **self.clock.save(0))
        self.system.start()
        self.stop.__enter__()
        self.heartbeat.__enter__()

    def set_total_steps(self, total: int | None) -> None:
        if total is not None and self.options.total_steps is None:
            self.record.update(total_steps=total)

    def set_batch(self, global_batch_size: int) -> None:
        """Examples per step (first seen): examples/s, and FLOPs per step from per example."""
        if self.record.data["plan"].get("global_batch_size") is None:
            self.record.data["plan"]["global_batch_size"] = global_batch_size

    def count_flops(self, model: Any, input_shape: Any, *, on_gpu: bool,
                    mixed_precision: bool = False) -> None:
        """FLOPs per step from the model (TensorFlow's count of its forward pass × 3 × the
        batch) and the replicas' peak, as distagent's plan counts them; left unknown (no MFU)
        where TensorFlow counts nothing."""
        from distagent.flops import device_peak, model_forward_flops
        from distagent.plan import TRAINING_MULTIPLIER

        batch = self.record.data["plan"].get("global_batch_size")
        if self.flops_per_step is None and batch and input_shape is not None:
            forward = model_forward_flops(model, input_shape)
            if forward is not None:
                self.flops_per_step = TRAINING_MULTIPLIER * forward * batch
        peak, _ = device_peak(on_gpu=on_gpu, mixed_precision=mixed_precision,
                              peak_tflops=self.options.peak_tflops)
        if peak is not None:
            devices = self.where.replicas if on_gpu else self.where.workers
            self.peak_flops = peak.flops_per_second * devices
        self.record.update(flops_per_step=self.flops_per_step, peak_flops=self.peak_flops)

    # The step's marks, on the training thread: no I/O outside log points.

    def step_began(self) -> None:
        self._step_start = time.perf_counter()
        self._phase_at = None

    def waited(self, seconds: float) -> None:
        if self._interval is not None:
            self._interval.wait += seconds

    def reducing(self) -> None:
        """This worker holds the step's gradients and enters the reduction."""
        self._phase_at = time.perf_counter()
        self.reached = self.step + 1

    def step_ended(self, loss: Any = None) -> None:
        now = time.perf_counter()
        self.step += 1
        self.reached = self.step
        self.heartbeat.step_ended(self.step)
        interval = self._interval
        if interval is None:  # the first step traced and compiled: it ends the start-up
            if self.wait_source is not None:
                self.wait_source()  # the first step's wait is start-up's, like its seconds
            self.clock.switch(STEPS)
            self._interval = _Interval()
            return
        if self.clock.state != STEPS:  # a loop that had left came back
            self.clock.switch(STEPS)
        interval.steps += 1
        if self._phase_at is not None:
            interval.phased += 1
            interval.compute += self._phase_at - self._step_start
            interval.reduce += now - self._phase_at
        if loss is not None:
            interval.losses.append(loss)
        if self.step % self.options.log_every == 0 and \
                now - interval.start >= self.options.log_seconds:
            self.log()

    def loop_left(self, bucket: str | None = "teardown") -> None:
        """The training loop ended or broke off: log what it did; the rest (the iterator's
        end, which joins tf.data's threads) goes to `bucket` (None: unknown), not to the
        steps, until the next step ends."""
        self.log()
        self.clock.switch(bucket)
        self.restart_interval()

    def restart_interval(self) -> None:
        """Time from now (what came before, evaluation say, is not the steps')."""
        if self._interval is not None:
            self._interval = _Interval()

    def log(self, scalars: Mapping[str, float] | None = None) -> None:
        """A log point: the interval's means to TensorBoard, the heartbeat and run.json."""
        interval = self._interval
        if interval is None or interval.steps == 0:
            return
        if self.wait_source is not None:
            interval.wait += self.wait_source()
        out = self._scalars(interval)
        out.update(scalars or {})
        self.clock.steps_logged(interval.wait)
        self.clock.switch(None)  # the log point's own writes: measured as unknown
        self.heartbeat.interval(self.step, out, steps=interval.steps)
        finite = {tag: float(v) for tag, v in out.items() if math.isfinite(v)}
        self.writers.write_compiled(names.TRAIN_DIR, self.step,
                                    {**finite, **self.clock.scalars()})
        self.logged_step = self.step
        self.record.update(throttle_s=1.0, later=True, last_step=self.step, metrics=finite,
                           **self.clock.save(self.step))
        self.clock.switch(STEPS)
        self._interval = _Interval()

    def _scalars(self, interval: _Interval) -> dict[str, float]:
        batch = self.record.data["plan"].get("global_batch_size")
        phased = interval.phased == interval.steps
        timing = Timing(steps=interval.steps,
                        wall_seconds=time.perf_counter() - interval.start,
                        wait_seconds=interval.wait,
                        compute_seconds=interval.compute if phased else None,
                        reduce_seconds=interval.reduce if phased else None)
        out = interval_scalars({"loss_sum": 0.0, "correct": 0.0, "examples": 0.0}, timing,
                               global_batch_size=batch or 0, learning_rate=math.nan,
                               flops_per_step=self.flops_per_step if batch else None,
                               peak_flops=self.peak_flops)
        if not batch:
            out.pop(names.EXAMPLES_PER_SECOND, None)
        if interval.losses:
            out[names.LOSS] = sum(float(v) for v in interval.losses) / len(interval.losses)
        return out

    def end(self, status: str, *, error: str | None = None, trace: str | None = None,
            message: str | None = None) -> None:
        """The final record: `status`, the error if any; everything closed. Once only."""
        if self.ended is not None:
            return
        self.ended = status
        self.clock.switch("teardown")
        try:
            self.heartbeat.__exit__(None, None, None)
            self.writers.close()
        finally:
            self.record.update(status=status, last_step=self.step, end_time=time.time(),
                               message=message, error=error, traceback=trace,
                               error_step=self.step if error else None,
                               **self.clock.save(self.step))
            self.record.close()
            self.clock.close()
            self.system.close()
            self.stop.__exit__(None, None, None)


def error_line(err: BaseException) -> str:
    return str(err) if isinstance(err, DistmonError) else f"{type(err).__name__}: {err}"
