"""`run_job`: one training job from a config, start to final status.

Seam for multi-worker (distagent.cluster, launch-local): call

    run_job(cfg, run_dir=shared_run_dir, cluster=cluster)

on every worker. `cluster` is passed through to `distagent.devices.resolve_strategy` (which hands
`strategy.kind = "multi_worker"` to `distagent.cluster.resolve_multi_worker`); the returned
`StrategySetup.task_index` says who this worker is, and the chief is `cluster.is_chief` when the
object has that attribute, else task 0. Every worker builds the same model and runs the same
steps (collectives need all of them); only the chief writes `train/`, `validation/`, `run.json`
and keeps checkpoints (the others save into a scratch directory that is deleted, see
checkpoint.py); every worker records its own system samples, into `system/` for a single worker
and `system/worker-<i>/` (distcore.names.worker_system_dir) when there are several.

A stop signal reaches one worker, but every worker must stop at the same step (the others would
wait in the next all-reduce). Agreeing on that step belongs to the cluster code: pass
`make_step_hook`, which gets the `Checkpointer` (its `.manager` is a tf.train.CheckpointManager,
as TensorFlow's PreemptionCheckpointHandler takes) and returns a function called with the global
step after every compiled call on every worker; it may save, or `request()` the `StopRequest`
passed as `stop`, which every worker then honours at that step boundary.
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras

from distagent.config import config_to_dict, write_resolved
from distagent.devices import StrategySetup, resolve_strategy
from distagent.model_check import checked_objective, job_model
from distagent.pipeline import build_input, plan_for
from distagent.plan import Plan
from distagent.schema import JobConfig, TelemetryConfig
from distagent.train.checkpoint import Checkpointer
from distagent.train.failure import error_line
from distagent.train.heartbeat import HangSettings, Heartbeat
from distagent.train.ledger import AttemptClock, start_clock
from distagent.train.loop import LoopSettings, Outcome, Trainer
from distagent.train.phases import PhaseProbe
from distagent.train.profiling import Profiling
from distagent.train.progress import Progress, Quiet
from distagent.train.rundir import (
    RunRecord,
    is_same_process,
    process_identity,
    run_dir_for,
)
from distagent.train.schedule import WarmupDecay
from distagent.train.signals import StopRequest
from distagent.train.steps import EvalStep, Health, TrainState, TrainStep
from distagent.train.summaries import Writers
from distcore import names
from distcore.errors import DistmonError, StorageError, storage_problem
from distcore.jobs.agent import read_run_json
from distcore.textsafe import terminal_text
from distcore.wording import counted


def make_optimizer(name: str, schedule: Any, *, mixed_precision: bool = False) -> Any:
    optimizers: dict[str, Any] = {
        "sgd": lambda: keras.optimizers.SGD(schedule),
        "momentum": lambda: keras.optimizers.SGD(schedule, momentum=0.9),
        "adam": lambda: keras.optimizers.Adam(schedule),
        "adamw": lambda: keras.optimizers.AdamW(schedule),
        "rmsprop": lambda: keras.optimizers.RMSprop(schedule),
    }
    optimizer = optimizers[name]()
    if mixed_precision:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def refuse_if_running(run_dir: Path) -> None:
    record = read_run_json(run_dir)
    if record and record.get("status") == names.STATUS_RUNNING and \
            is_same_process(record, run_dir):
        raise DistmonError(
            f"{run_dir} is in use by a running job (pid {record['pid']}); "
            f"stop it with `distagent stop {run_dir}`"
        )


@contextlib.contextmanager
def _precision(mixed: bool) -> Iterator[None]:
    if not mixed:
        yield
        return
    previous = keras.mixed_precision.global_policy().name
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


@contextlib.contextmanager
def _system_recorder(
    run_dir: Path, setup: StrategySetup, telemetry: TelemetryConfig
) -> Iterator[None]:
    from distagent.system_record import SystemRecorder

    several = setup.workers > 1
    subdir = names.worker_system_dir(setup.task_index) if several else names.SYSTEM_DIR
    # A resumed run keeps counting from its first start, so earlier samples are not superseded.
    origin = (read_run_json(run_dir) or {}).get("first_start_time")
    recorder = SystemRecorder(
        run_dir, interval=telemetry.interval_seconds, subdir=subdir, pids=[os.getpid()],
        origin=origin if isinstance(origin, int | float) else None,
        simulate_gpus=telemetry.simulate_gpus, worker=setup.task_index if several else None,
    )
    recorder.start()
    try:
        yield
    finally:
        recorder.close()


def _initial_record(
    cfg: JobConfig, plan: Plan, run_dir: Path, resumed: str | None
) -> dict[str, Any]:
    previous = read_run_json(run_dir) or {}
    now = time.time()
    return {
        # The first session's start survives resumes; start_time is this session's.
        "first_start_time": previous.get("first_start_time", now) if resumed else now,
        "metrics": previous.get("metrics") or {} if resumed else {},
        # Rollbacks after divergence (recovery.py); a resumed run keeps counting its own.
        "recoveries": previous.get("recoveries") or [] if resumed else [],
        **process_identity(),
        "run_dir": str(run_dir.resolve()),
        "name": cfg.run.name,
        "status": names.STATUS_RUNNING,
        "config": config_to_dict(cfg),
        "plan": plan.to_json(),
        "start_time": now,
        "end_time": None,
        "last_step": None,
        "total_steps": plan.total_steps,
        "resumed_from": resumed,
        "error": None,
        "error_step": None,  # diverged: the first non-finite loss; failed: the step reached
        "message": None,
    }


StepHook = Callable[[int], None]


@dataclass(frozen=True)
class _Job:
    cfg: JobConfig
    plan: Plan
    setup: StrategySetup
    run_dir: Path
    is_chief: bool
    progress: Progress
    stop: StopRequest
    steps_per_call: int
    make_step_hook: Callable[[Checkpointer], StepHook] | None
    cluster: Any = None  # the ClusterRequest of a multi-worker job, else None
    entered: float | None = None  # when run_job was called: a library call's start-up begins
    retain: Callable[[Any], None] | None = None


def run_job(
    cfg: JobConfig,
    *,
    run_dir: Path | None = None,
    cluster: Any = None,
    progress: Progress | None = None,
    stop: StopRequest | None = None,
    steps_per_call: int | None = None,
    make_step_hook: Callable[[Checkpointer], StepHook] | None = None,
    retain: Callable[[Any], None] | None = None,
) -> str:
    """Train `cfg` into `run_dir` (default <logdir>/<run.name>); returns the final status.

    `stop`: request() it (from any thread) to stop at the next step boundary with a checkpoint.
    `steps_per_call`: steps per compiled call (default `train.steps_per_execution`; an inner
    loop whose calls never cross a logging or checkpoint boundary).
    `make_step_hook(checkpointer)`: returns a function called with the global step after every
    compiled call, on every worker (e.g. TensorFlow's PreemptionCheckpointHandler, built on
    `checkpointer.manager`, saving when any worker was told to stop).
    `retain(obj)`: given, takes what should end with the caller, not with the run (the training
    iterator, whose end waits for tf.data's threads).
    """
    entered = time.time()
    run_dir = Path(run_dir) if run_dir is not None else run_dir_for(cfg.run.logdir, cfg.run.name)
    setup = resolve_strategy(cfg.strategy, cluster=cluster)
    is_chief = bool(getattr(cluster, "is_chief", setup.task_index == 0))
    progress = progress if progress is not None and is_chief else Quiet()
    for warning in setup.warnings:
        progress.message(terminal_text(f"warning: {warning}"))
    if is_chief:
        refuse_if_running(run_dir)
    plan = plan_for(cfg, replicas=setup.replicas, devices=setup.devices, workers=setup.workers)
    for warning in plan.warnings:
        progress.message(terminal_text(f"warning: {warning}"))
    keras.utils.set_random_seed(cfg.run.seed)
    try:
        with _precision(cfg.train.mixed_precision), \
                _system_recorder(run_dir, setup, cfg.telemetry), \
                stop or StopRequest() as stop_request:
            job = _Job(cfg, plan, setup, run_dir, is_chief, progress, stop_request,
                       steps_per_call or cfg.train.steps_per_execution, make_step_hook, cluster,
                       entered, retain)
            return _train(job)
    except Exception as err:  # a disk full from the start: its one line, not a traceback
        problem = None if isinstance(err, DistmonError) else storage_problem(err)
        if problem is None:
            raise
        raise StorageError(problem) from None


def _train(job: _Job) -> str:
    cfg, plan, run_dir, progress = job.cfg, job.plan, job.run_dir, job.progress
    strategy = job.setup.strategy
    data = build_input(cfg, plan, strategy=strategy)
    with strategy.scope():
        model = job_model(cfg, data.source, data.element_spec,
                          sync_batchnorm=cfg.model.sync_batchnorm)
    objective = checked_objective(cfg, model, data.source, data.element_spec)
    state = TrainState.create(objective.counter_names())
    schedule = WarmupDecay(
        base_rate=plan.base_learning_rate, scaled_rate=plan.learning_rate,
        warmup_steps=plan.warmup_steps, total_steps=plan.total_steps, decay=cfg.optimizer.decay,
        scale=state.lr_scale,
    )
    with strategy.scope():
        optimizer = make_optimizer(cfg.optimizer.name, schedule,
                                   mixed_precision=cfg.train.mixed_precision)
        optimizer.build(model.trainable_variables)
    plan = _counted(job, model, data.element_spec[0])
    checkpointer = Checkpointer(
        run_dir, {"model": model, "optimizer": optimizer, **state.checkpointables()},
        is_chief=job.is_chief, task_index=job.setup.task_index,
    )
    if job.is_chief:  # what killed or refused saves left behind
        checkpointer.remove_partial()
    clock = start_clock(run_dir, checkpointer, job.setup.task_index, entered=job.entered)
    try:
        with clock.spent("restore"):
            resumed = checkpointer.restore()
    except DistmonError as err:  # a corrupt checkpoint, or one of another job: say so there too
        _refused(job, run_dir, checkpointer.latest(), str(err), clock)
        clock.close()
        raise
    start_step = int(state.step.numpy())
    if resumed:
        clock.resumed(start_step)
    record = RunRecord(run_dir, _initial_record(cfg, plan, run_dir, resumed),
                       enabled=job.is_chief, free_space=checkpointer.remove_partial)
    if job.is_chief:
        write_resolved(cfg, run_dir)
    record.update(last_step=start_step, **clock.save(start_step))  # the earlier attempts too
    # Names and paths come from the config: escaped, like every outside string on a terminal.
    progress.message(terminal_text(
        f"{cfg.run.name}: {counted(plan.total_steps, 'step')} of "
        f"{counted(plan.global_batch_size, 'example')} on "
        f"{counted(plan.replicas, 'replica')}, learning rate {plan.learning_rate_provenance}; "
        f"{run_dir}"
    ))
    if resumed:
        progress.message(terminal_text(f"resuming {run_dir} from step {start_step} ({resumed})"))
    writers = Writers(run_dir, enabled=job.is_chief)
    # The training iterator ends after the final record: its end joins tf.data's threads (0.3-1.9
    # s measured under load), which run.json's end and the user's last line need not wait for.
    kept: list[Any] = []
    trainer = Trainer(
        strategy=strategy,
        train_step=TrainStep(strategy, model, optimizer, state,
                             global_batch_size=plan.global_batch_size,
                             jit_compile=cfg.train.jit_compile, health=_health(cfg),
                             objective=objective),
        eval_step=EvalStep(strategy, model, objective),
        state=state, schedule=schedule,
        train_dataset=data.train, validation_dataset=data.validation,
        settings=LoopSettings(
            total_steps=plan.total_steps, steps_per_epoch=plan.steps_per_epoch,
            global_batch_size=plan.global_batch_size, log_every=cfg.train.log_every_steps,
            checkpoint_every=cfg.train.checkpoint_every_steps,
            steps_per_call=job.steps_per_call, stop_on_nan=cfg.train.stop_on_nan,
            on_divergence=cfg.train.on_divergence, max_recoveries=cfg.train.max_recoveries,
            recovery_lr_factor=cfg.train.recovery_lr_factor,
            loss_upper_bound=cfg.train.loss_upper_bound,
            loss_bound_factor=cfg.train.loss_bound_factor,
            histogram_every=cfg.train.histogram_every_steps,
            flops_per_step=plan.flops_per_step, peak_flops=plan.peak_flops_per_second,
        ),
        writers=writers, checkpointer=checkpointer, record=record, progress=progress,
        stop=job.stop, epochs=plan.epochs,
        step_hook=job.make_step_hook(checkpointer) if job.make_step_hook else None,
        clock=clock, retain=job.retain or kept.append,
        profiling=Profiling(cfg.profile, run_dir=run_dir if job.is_chief else None,
                            say=progress.message),
    )
    try:
        with _heartbeat(job, state, record) as heartbeat:
            trainer.heartbeat = heartbeat
            outcome = trainer.run(start_step)
    except BaseException as err:
        clock.switch("teardown")
        _failed(job, err, int(state.step.numpy()), record, writers, clock)
        raise
    clock.switch("teardown")
    writers.close()
    if job.is_chief:
        checkpointer.remove_partial()
    _finish(record, outcome, clock=clock,
            error=outcome.message if outcome.status == names.STATUS_DIVERGED else None)
    clock.close()
    progress.message(terminal_text(
        f"{outcome.status} at step {outcome.step}/{plan.total_steps}"
        + (f": {outcome.message}" if outcome.message else "") + f"  ({run_dir})"))
    kept.clear()
    return outcome.status


def _counted(job: _Job, model: Any, features: Any) -> Plan:
    """The plan with the model's FLOPs (TensorFlow's count) and the replicas' peak, said once."""
    from distagent.flops import counted_plan, flops_text, model_forward_flops, peak_text

    plan, unknown = counted_plan(job.cfg, job.plan, model_forward_flops(model, features),
                                 hosts=job.setup.hosts)
    for warning in unknown:
        job.progress.message(terminal_text(f"warning: {warning}"))
    job.progress.message(terminal_text(f"{flops_text(plan)}; peak {peak_text(plan)}"))
    return plan


def _heartbeat(job: _Job, state: TrainState, record: RunRecord) -> Heartbeat:
    """This worker's heartbeat; the chief's also keeps run.json's `workers` and, on an abort
    for a hang, ends run.json `hung` (the other workers exit the same way, on their own)."""
    def read() -> tuple[int, int]:
        return int(state.reduced.numpy()), int(state.reached.numpy())

    def abort(message: str, step: int) -> None:
        record.update(status=names.STATUS_HUNG, last_step=step, end_time=time.time(),
                      message=message, error=message, error_step=None)

    def leave(code: int) -> None:  # the chief last, as at a job's end (commands/worker.py)
        from distagent.cluster.leave import leave_after_peers

        setup = getattr(job.cluster, "setup", None)
        if setup is None:
            os._exit(code)
        leave_after_peers(setup, code)

    cluster = job.cfg.cluster
    return Heartbeat(
        job.run_dir, worker=job.setup.task_index, workers=job.setup.workers,
        settings=HangSettings(hang_seconds=cluster.hang_seconds, on_hang=cluster.on_hang,
                              lost_seconds=cluster.timeout_seconds),
        probe=PhaseProbe(read), on_abort=abort, is_chief=job.is_chief,
        publish=lambda workers: record.update(workers=workers), exit_process=leave,
    )


def _refused(job: _Job, run_dir: Path, checkpoint: str | None, error: str,
             clock: AttemptClock) -> None:
    """run.json says `failed` with the one line the user sees, keeping the last step reached."""
    initial = _initial_record(job.cfg, job.plan, run_dir, checkpoint)
    reached = (read_run_json(run_dir) or {}).get("last_step")
    step = reached if isinstance(reached, int) and not isinstance(reached, bool) else 0
    record = RunRecord(run_dir, initial, enabled=job.is_chief)
    _finish(record, Outcome(names.STATUS_FAILED, step, None), error=error, clock=clock)


def _failed(job: _Job, err: BaseException, at: int, record: RunRecord, writers: Writers,
            clock: AttemptClock) -> None:
    """run.json ends `failed` with the error's one line. A refused write (a full disk) ends as
    StorageError, one line, rather than TensorFlow's traceback; so does a run.json that cannot
    record the end, naming both causes."""
    line = error_line(err, job.cluster)
    try:
        _finish(record, Outcome(names.STATUS_FAILED, at, None, error_step=at),
                error=line, trace=traceback.format_exc(), clock=clock)
    except StorageError as unrecorded:
        raise StorageError(f"{line}; {unrecorded}") from None
    finally:
        try:  # the events' last flush meets the same full disk: the cause is said above
            writers.close()
        except Exception:
            if storage_problem(err) is None:
                raise
        finally:
            clock.close()
    if not isinstance(err, DistmonError) and storage_problem(err) is not None:
        raise StorageError(line) from None


def _health(cfg: JobConfig) -> Health:
    return Health(clip_norm=cfg.optimizer.clip_norm,
                  non_finite_gradient_diverges=not cfg.train.mixed_precision)


def _finish(record: RunRecord, outcome: Outcome, *, clock: AttemptClock,
            error: str | None = None, trace: str | None = None) -> None:
    record.update(status=outcome.status, last_step=outcome.step, end_time=time.time(),
                  message=outcome.message, error=error, error_step=outcome.error_step,
                  traceback=trace, **clock.save(outcome.step))
