"""The training loop: compiled calls between boundaries, and what happens at each boundary.

A boundary is a log point (every `log_every` steps), a checkpoint (`checkpoint_every`), an epoch's
end, the last step, or a stop request. One compiled call never crosses a boundary, so the loop
reads counters (the only host-device sync) once per log interval, not per step.

Timing per log interval: wall time from the end of the previous boundary's work to the end of
the interval (the host waits for the step's results there), divided over the interval's steps.
Calls that traced a new graph are left out of the timing (their seconds are compilation, not
training); an interval with nothing left to time writes no perf tags rather than a made-up one.

A divergence (see recovery.py) is found at the next boundary: it stops the run, is ignored, or
rolls back to the newest checkpoint and goes on from there with the data iterator left where it
is. Histograms (every `histogram_every` steps) are a boundary too: the call that ends there keeps
its last gradient.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import distagent.train.recovery as rec
from distagent.train.ledger import STEPS, AttemptClock
from distagent.train.profiling import Profiling
from distagent.train.progress import Progress
from distagent.train.rundir import RunRecord
from distagent.train.signals import StopRequest
from distagent.train.summaries import Timing, Writers, epoch_scalars, interval_scalars
from distcore import names
from distcore.wording import counted

if TYPE_CHECKING:  # TensorFlow stays unloaded for the pure parts (boundaries, settings)
    from distagent.train.checkpoint import Checkpointer
    from distagent.train.steps import EvalStep, TrainState, TrainStep


@dataclass(frozen=True)
class LoopSettings:
    total_steps: int
    steps_per_epoch: int
    global_batch_size: int
    log_every: int = 10
    checkpoint_every: int = 100
    steps_per_call: int = 1
    stop_on_nan: bool = True
    on_divergence: str = "stop"
    """The action in force (recovery.divergence_action): stop, rollback or continue."""
    max_recoveries: int = 3
    recovery_lr_factor: float = 0.5
    loss_upper_bound: float = 0.0
    """>0: the loss bound from the start; 0: loss_bound_factor × the first logged loss."""
    loss_bound_factor: float = 0.0
    histogram_every: int = 0
    flops_per_step: float | None = None
    """Model FLOPs of one step (flops.py); None: not counted, no FLOP tags."""
    peak_flops: float | None = None
    """The replicas' peak FLOP/s together; None: unknown, no MFU tag."""

    @property
    def action(self) -> str:
        return rec.divergence_action(self.on_divergence, self.stop_on_nan)


def steps_until_boundary(step: int, s: LoopSettings) -> int:
    """How many steps the next compiled call may run from `step` without crossing a boundary."""
    limits = [s.steps_per_call, s.total_steps - step]
    for every in (s.log_every, s.checkpoint_every, s.steps_per_epoch, s.histogram_every):
        if every > 0:
            limits.append(every - step % every)
    return max(1, min(limits))


_TIMERS = ("wait_seconds", "compute_seconds", "reduce_seconds")


def _due(step: int, every: int) -> bool:
    return every > 0 and step % every == 0


@dataclass
class _Interval:
    start: float = field(default_factory=time.perf_counter)
    steps: int = 0
    offsets: dict[str, float] = field(default_factory=dict)
    """The in-graph timers' sums at the interval's start (a call that compiled is not timed)."""

    def since(self, counters: dict[str, float], name: str) -> float:
        return counters[name] - self.offsets.get(name, 0.0)


@dataclass
class Outcome:
    status: str
    step: int
    message: str | None = None
    error_step: int | None = None
    """The step the error happened at (diverged: the first non-finite loss), for run.json."""


class Trainer:
    def __init__(
        self,
        *,
        strategy: Any,
        train_step: TrainStep,
        eval_step: EvalStep | None,
        state: TrainState,
        schedule: Callable[[Any], Any],
        train_dataset: Any,
        validation_dataset: Any,
        settings: LoopSettings,
        writers: Writers,
        checkpointer: Checkpointer,
        record: RunRecord,
        progress: Progress,
        stop: StopRequest,
        epochs: int,
        step_hook: Callable[[int], None] | None = None,
        heartbeat: Any = None,
        clock: AttemptClock | None = None,
        retain: Callable[[Any], None] | None = None,
        profiling: Profiling | None = None,
    ) -> None:
        self.strategy = strategy
        self.train_step = train_step
        self.eval_step = eval_step
        self.state = state
        self.schedule = schedule
        self.train_dataset = train_dataset
        self.validation = (
            strategy.experimental_distribute_dataset(validation_dataset)
            if validation_dataset is not None and eval_step is not None else None
        )
        self.s = settings
        self.writers = writers
        self.checkpointer = checkpointer
        self.record = record
        self.progress = progress
        self.stop = stop
        self.epochs = epochs
        self.step_hook = step_hook
        self.heartbeat = heartbeat  # heartbeat.Heartbeat: step ends and interval timings
        # Given, the training iterator is handed to it to outlive run(): its end joins tf.data's
        # threads, seconds under load, which the caller decides when to wait for.
        self.retain = retain
        self.profiling = profiling or Profiling()  # the default never profiles
        from distagent.train.schedule import rate_reader

        self.rate_at = rate_reader(schedule)
        self.clock = clock or AttemptClock(None, process_start=time.time())
        self.recoveries: list[dict[str, Any]] = list(record.data.get("recoveries") or [])
        self._restart_at: int | None = None

    def run(self, start_step: int) -> Outcome:
        """Train from `start_step` (restored from a checkpoint, or 0) to the planned total."""
        try:
            return self._run(start_step)
        finally:  # however the loop ends, an open profile is written
            self.profiling.close()

    def _run(self, start_step: int) -> Outcome:
        if start_step >= self.s.total_steps:
            return Outcome(names.STATUS_FINISHED, start_step, "already finished")
        if self.s.action == rec.ROLLBACK and start_step == 0:
            # The initial state is a checkpoint to roll back to (a later start resumed from
            # one). Decided on the step, not on the directory: every worker must take part in
            # a save, and the chief's files may appear while another worker looks.
            with self.clock.spent("checkpoint"):
                self.checkpointer.save(0)
            self._checkpointed(0)
        # The data position is the step (plus the batches recoveries moved past): skip the
        # batches the checkpointed steps consumed.
        if self.s.loss_upper_bound > 0:
            self.state.loss_bound.assign(self.s.loss_upper_bound)
        position = start_step + int(self.state.data_skip.numpy())
        dataset = self.train_dataset.skip(position) if position else self.train_dataset
        iterator = iter(self.strategy.experimental_distribute_dataset(dataset))
        if self.retain is not None:
            self.retain(iterator)
        step, interval = start_step, _Interval()
        while step < self.s.total_steps:
            n = steps_until_boundary(step, self.s)
            traces = self.train_step.tracing_count()
            # A profiled step spans what the interval's timing counts: the call and its
            # bookkeeping; starting and writing a profile is counted as neither.
            interval.start += self.profiling.between(step)
            with self.profiling.trace(step):
                self.train_step(iterator, n, keep_gradients=_due(step + n, self.s.histogram_every))
                self._stepped(step + n)
            step += n
            if self.train_step.tracing_count() != traces:
                interval = self._untimed()
            else:
                interval.steps += n
            boundary_start = time.perf_counter()
            outcome, logged = self._boundary(step, interval)
            if outcome is not None:
                return self._ended(outcome)
            self.clock.switch(STEPS)
            if self._restart_at is not None:  # rolled back: go on from the restored step
                step, self._restart_at = self._restart_at, None
                interval = _Interval()
                continue
            if logged:
                interval = _Interval()
            else:  # a checkpoint's seconds are not the steps'
                interval.start += time.perf_counter() - boundary_start
        return self._ended(Outcome(names.STATUS_FINISHED, step))

    def _stepped(self, step: int) -> None:
        """A call ended at `step`: the heartbeat, the clock and the hook are told."""
        if self.heartbeat is not None:
            self.heartbeat.step_ended(step)
        if self.clock.state == "startup":  # the first call ends the start-up
            self.clock.switch(STEPS)
        if self.step_hook is not None:
            self.step_hook(step)

    def _ended(self, outcome: Outcome) -> Outcome:
        """The loop's last boundary is behind it: what follows (the heartbeat's stop, the final
        record) is teardown, not steps. Counted as compute after the last checkpoint, a stopped
        job's resume would move it to `lost`."""
        self.clock.switch("teardown")
        return outcome

    def _untimed(self) -> _Interval:
        """Restart the timing after a call that compiled: its wait and seconds are not steps'."""
        counters = self.state.read(self.state.interval)
        return _Interval(steps=0, offsets={name: counters[name] for name in _TIMERS})

    def _boundary(self, step: int, interval: _Interval) -> tuple[Outcome | None, bool]:
        """Log, end the epoch, checkpoint as due; (outcome if the run ends here, logged)."""
        s = self.s
        last = step >= s.total_steps
        stopping = self.stop.requested  # read once per boundary: it may consult the cluster
        logged = _due(step, s.log_every) or last or stopping
        if logged:
            diverged = self._log(step, interval)
            if diverged is not None or self._restart_at is not None:
                return diverged or self._stopped_after_rollback(stopping), logged
        if _due(step, s.histogram_every):
            self.writers.histograms(step, self.train_step.model.trainable_variables,
                                    self.train_step.kept_gradients)
        epoch_end = _due(step, s.steps_per_epoch)
        if epoch_end:
            self._end_epoch(step)
        checkpoint_due = _due(step, s.checkpoint_every)
        if epoch_end or checkpoint_due or last or stopping:
            diverged = self._check_finite(step)
            if diverged is not None or self._restart_at is not None:
                return diverged or self._stopped_after_rollback(stopping), logged
            with self.clock.spent("checkpoint"):
                # A resume starts after this step and never writes its points again: they are
                # written before the checkpoint that makes them final (a kill -9 loses what
                # the writing thread still holds).
                self.writers.flush()
                self.checkpointer.save(step)
            self._checkpointed(step)
        if stopping:
            stopped = Outcome(names.STATUS_STOPPED, step, f"stopped by {self.stop.signal_name}")
            return stopped, logged
        return None, logged

    def _stopped_after_rollback(self, stopping: bool) -> Outcome | None:
        """A stop request wins over the rollback's rerun: the job ends at the restored step,
        whose checkpoint is on disk (a job that diverges at every boundary would else never
        reach the stop below)."""
        if not stopping or self._restart_at is None:
            return None
        restored, self._restart_at = self._restart_at, None
        return Outcome(names.STATUS_STOPPED, restored, f"stopped by {self.stop.signal_name}")

    def _log(self, step: int, interval: _Interval) -> Outcome | None:
        counters = self.state.read(self.state.interval)  # waits for the interval's steps
        timing = Timing(
            steps=interval.steps,
            wall_seconds=time.perf_counter() - interval.start,
            wait_seconds=interval.since(counters, "wait_seconds"),
            compute_seconds=interval.since(counters, "compute_seconds"),
            reduce_seconds=interval.since(counters, "reduce_seconds"),
        )
        rate = self.rate_at(step - 1)
        scalars = interval_scalars(
            counters, timing, global_batch_size=self.s.global_batch_size, learning_rate=rate,
            flops_per_step=self.s.flops_per_step, peak_flops=self.s.peak_flops,
        )
        self.clock.steps_logged(timing.wait_seconds)
        self.clock.switch(None)  # the log point's own writes: measured as unknown
        self.state.reset(self.state.interval)
        self.profiling.logged(step, scalars.get(names.INPUT_WAIT_FRACTION))
        if self.heartbeat is not None:
            self.heartbeat.interval(step, scalars, steps=interval.steps)
        scalars[names.GRAD_NORM] = float(self.state.grad_norm.numpy())  # the last step's
        diverged = self._check_finite(step, scalars.get(names.LOSS))
        if self._restart_at is not None:  # rolled back: this interval's points are undone
            return None
        self._set_relative_bound(scalars.get(names.LOSS))
        finite = {tag: v for tag, v in scalars.items() if math.isfinite(v)}
        self.writers.write_compiled(names.TRAIN_DIR, step, {**finite, **self.clock.scalars()})
        epoch = min(self.epochs, (step - 1) // self.s.steps_per_epoch + 1)
        self.progress.update(step, self.s.total_steps, epoch, self.epochs, scalars)
        self.record.update(throttle_s=1.0, later=True, last_step=step, metrics=finite,
                           **self.clock.save(step))
        return diverged

    def _set_relative_bound(self, loss: float | None) -> None:
        """At the first log point with a finite loss, with no bound given: the bound relative to
        it. Every worker reads the same all-reduced loss, so all set the same bound."""
        if self.s.loss_upper_bound > 0 or loss is None or self._bound() > 0:
            return
        bound = rec.relative_bound(loss, self.s.loss_bound_factor)
        if bound is None:
            return
        self.state.loss_bound.assign(bound)
        self.record.update(loss_bound=bound)
        self.progress.message(f"loss bound: {bound:.4g} ({self.s.loss_bound_factor:g}× the "
                              f"first loss, {loss:.4g}); a step loss above it is a divergence")

    def _bound(self) -> float:
        """The loss bound in force; 0 while there is none."""
        bound = float(self.state.loss_bound.numpy())
        return bound if math.isfinite(bound) else 0.0

    def _check_finite(self, step: int, interval_loss: float | None = None) -> Outcome | None:
        """The diverged outcome once a divergence was seen (None after a rollback, or when the
        action is "continue"); first writes that loss at the step it happened, so TensorBoard
        and every reader see the point the run stopped (or rolled back) for.
        `interval_loss`: the mean loss of the interval just read (None: read the counters)."""
        bad = int(self.state.first_bad_step.numpy())
        if bad < 0 or self.s.action == rec.CONTINUE:
            return None
        loss = float(self.state.bad_loss.numpy())
        if interval_loss is None:
            counters = self.state.read(self.state.interval)
            interval_loss = counters["loss_sum"] / counters["examples"] \
                if counters["examples"] > 0 else None
        # A non-finite bad step is in this interval (it is checked at every boundary), so the
        # interval's mean is non-finite too: NaN, or ±inf when no step made NaN.
        if not math.isfinite(loss) and interval_loss is not None \
                and not math.isfinite(interval_loss):
            loss = interval_loss
        self.writers.write(names.TRAIN_DIR, bad, {names.LOSS: loss})
        self.writers.flush()
        message = rec.divergence_message(bad, loss, self._bound())
        if self.s.action == rec.ROLLBACK:
            if len(self.recoveries) < self.s.max_recoveries:
                self._roll_back(step, bad, loss)
                return None
            message += f" (after {counted(len(self.recoveries), 'recovery', 'recoveries')})"
        return Outcome(names.STATUS_DIVERGED, step, message, error_step=bad)

    def _roll_back(self, step: int, bad: int, loss: float) -> None:
        """Restore the newest checkpoint, scale the learning rate, keep the data position."""
        state = self.state
        lr_before = float(self.schedule(bad - 1))
        position = step + int(state.data_skip.numpy())  # batches the iterator has handed out
        scale = float(state.lr_scale.numpy())
        with self.clock.spent("recovery"):
            self.checkpointer.restore()
        restored = int(state.step.numpy())
        self.clock.rolled_back(restored)
        state.lr_scale.assign(scale * self.s.recovery_lr_factor)
        state.data_skip.assign(position - restored)
        state.clear_divergence()
        recovery = rec.Recovery(
            step=bad, loss=loss, reason=rec.divergence_reason(loss, self._bound()),
            lr_before=lr_before, lr_after=float(self.schedule(bad - 1)), restored_step=restored,
                            skipped_batches=step - restored)
        self.recoveries.append(recovery.to_json())
        self.writers.write(names.TRAIN_DIR, bad, {names.RECOVERIES: float(len(self.recoveries))})
        self.writers.flush()
        self.record.update(recoveries=self.recoveries, last_step=restored,
                           **self.clock.save(restored))
        self.progress.message(recovery.message(len(self.recoveries), self.s.max_recoveries))
        self._restart_at = restored

    def _checkpointed(self, step: int) -> None:
        """The checkpoint at `step` is what a resume goes back to: recorded at once."""
        self.clock.checkpointed(step)
        self.record.update(**self.clock.save(step))

    def _end_epoch(self, step: int) -> None:
        epoch_index = step // self.s.steps_per_epoch - 1
        train = epoch_scalars(self.state.read(self.state.epoch))
        self.writers.write(names.TRAIN_DIR, epoch_index, train)
        self.state.reset(self.state.epoch)
        if self.validation is not None and self.eval_step is not None:
            with self.clock.spent("evaluation"):
                sums = self.eval_step(self.validation)
            self.writers.write(names.VALIDATION_DIR, epoch_index, epoch_scalars(sums))
        self.writers.flush()
