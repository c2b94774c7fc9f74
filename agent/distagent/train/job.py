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
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras

from distagent.config import write_resolved
from distagent.devices import StrategySetup, resolve_strategy
from distagent.model_check import checked_objective, job_model
from distagent.objective import Objective
from distagent.pipeline import build_input, plan_for
from distagent.plan import Plan
from distagent.schema import JobConfig
from distagent.train.bare import is_bare
from distagent.train.checkpoint import Checkpointer
from distagent.train.job_record import failed, finish, initial_record, refused
from distagent.train.ledger import AttemptClock
from distagent.train.loop import LoopSettings, Outcome, Trainer
from distagent.train.profiling import Profiling
from distagent.train.progress import Progress, Quiet
from distagent.train.rundir import RunRecord, is_same_process, run_dir_for, threads_now
from distagent.train.schedule import WarmupDecay
from distagent.train.signals import StopRequest
from distagent.train.steps import EvalStep, Health, TrainState, TrainStep
from distagent.train.summaries import Writers
from distagent.train.watchers import heartbeat, job_clock, system_recorder
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
                system_recorder(run_dir, setup, cfg.telemetry), \
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


@dataclass(frozen=True)
class _Model:
    """What the steps train, and with what: built in the strategy's scope."""

    data: Any  # pipeline.Input
    model: Any
    optimizer: Any
    objective: Objective
    state: TrainState
    schedule: WarmupDecay


def _train(job: _Job) -> str:
    built = _build(job)
    plan = _counted(job, built.model, built.data.element_spec[0])
    checkpointer = Checkpointer(
        job.run_dir, {"model": built.model, "optimizer": built.optimizer,
                      **built.state.checkpointables()},
        is_chief=job.is_chief, task_index=job.setup.task_index,
    )
    if job.is_chief:  # what killed or refused saves left behind
        checkpointer.remove_partial()
    clock = job_clock(job.run_dir, checkpointer, job.setup.task_index, job.entered)
    resumed = _restore(job, plan, checkpointer, clock)
    start_step = int(built.state.step.numpy())
    record = _started(job, plan, resumed, start_step, checkpointer, clock)
    writers = Writers(job.run_dir, enabled=job.is_chief)
    # The training iterator ends after the final record: its end joins tf.data's threads (0.3-1.9
    # s measured under load), which run.json's end and the user's last line need not wait for.
    kept: list[Any] = []
    trainer = _trainer(job, built, plan, writers=writers, checkpointer=checkpointer,
                       record=record, clock=clock, retain=job.retain or kept.append)
    outcome = _run(job, trainer, start_step)
    if job.is_chief:
        checkpointer.remove_partial()
    finish(record, outcome, clock=clock,
           error=outcome.message if outcome.status == names.STATUS_DIVERGED else None)
    clock.close()
    job.progress.message(terminal_text(
        f"{outcome.status} at step {outcome.step}/{plan.total_steps}"
        + (f": {outcome.message}" if outcome.message else "") + f"  ({job.run_dir})"))
    kept.clear()
    return outcome.status


def _build(job: _Job) -> _Model:
    cfg, plan, strategy = job.cfg, job.plan, job.setup.strategy
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
    return _Model(data, model, optimizer, objective, state, schedule)


def _restore(job: _Job, plan: Plan, checkpointer: Checkpointer,
             clock: AttemptClock) -> str | None:
    """The checkpoint resumed from, if any; a corrupt one, or one of another job, is said in
    run.json too, and raised."""
    try:
        with clock.spent("restore"):
            return checkpointer.restore()
    except DistmonError as err:
        refused(job.cfg, plan, job.run_dir, is_chief=job.is_chief,
                checkpoint=checkpointer.latest(), error=str(err), clock=clock)
        clock.close()
        raise


def _started(job: _Job, plan: Plan, resumed: str | None, start_step: int,
             checkpointer: Checkpointer, clock: AttemptClock) -> RunRecord:
    """run.json as the job starts (the earlier attempts' ledger too), and the user told."""
    cfg, run_dir, progress = job.cfg, job.run_dir, job.progress
    if resumed:
        clock.resumed(start_step)
    record = RunRecord(run_dir, initial_record(cfg, plan, run_dir, resumed),
                       enabled=job.is_chief, free_space=checkpointer.remove_partial,
                       at_write=threads_now)
    if job.is_chief:
        write_resolved(cfg, run_dir)
    record.update(last_step=start_step, **clock.save(start_step))
    # Names and paths come from the config: escaped, like every outside string on a terminal.
    progress.message(terminal_text(
        f"{cfg.run.name}: {counted(plan.total_steps, 'step')} of "
        f"{counted(plan.global_batch_size, 'example')} on "
        f"{counted(plan.replicas, 'replica')}, learning rate {plan.learning_rate_provenance}; "
        f"{run_dir}"
    ))
    if resumed:
        progress.message(terminal_text(f"resuming {run_dir} from step {start_step} ({resumed})"))
    return record


def _trainer(job: _Job, built: _Model, plan: Plan, *, writers: Writers,
             checkpointer: Checkpointer, record: RunRecord, clock: AttemptClock,
             retain: Callable[[Any], None]) -> Trainer:
    cfg, strategy, train = job.cfg, job.setup.strategy, job.cfg.train
    return Trainer(
        strategy=strategy,
        train_step=TrainStep(strategy, built.model, built.optimizer, built.state,
                             global_batch_size=plan.global_batch_size,
                             jit_compile=train.jit_compile, health=_health(cfg),
                             objective=built.objective, timed=not is_bare()),
        eval_step=EvalStep(strategy, built.model, built.objective),
        state=built.state, schedule=built.schedule,
        train_dataset=built.data.train, validation_dataset=built.data.validation,
        settings=LoopSettings(
            total_steps=plan.total_steps, steps_per_epoch=plan.steps_per_epoch,
            global_batch_size=plan.global_batch_size, log_every=train.log_every_steps,
            checkpoint_every=train.checkpoint_every_steps,
            steps_per_call=job.steps_per_call, stop_on_nan=train.stop_on_nan,
            on_divergence=train.on_divergence, max_recoveries=train.max_recoveries,
            recovery_lr_factor=train.recovery_lr_factor,
            loss_upper_bound=train.loss_upper_bound,
            loss_bound_factor=train.loss_bound_factor,
            histogram_every=train.histogram_every_steps,
            flops_per_step=plan.flops_per_step, peak_flops=plan.peak_flops_per_second,
        ),
        writers=writers, checkpointer=checkpointer, record=record, progress=job.progress,
        stop=job.stop, epochs=plan.epochs,
        step_hook=job.make_step_hook(checkpointer) if job.make_step_hook else None,
        clock=clock, retain=retain,
        profiling=Profiling(cfg.profile, run_dir=job.run_dir if job.is_chief else None,
                            say=job.progress.message),
    )


def _run(job: _Job, trainer: Trainer, start_step: int) -> Outcome:
    """The loop under the heartbeat, to its outcome with every log point written; a failure
    ends run.json `failed` and is raised."""
    state, clock = trainer.state, trainer.clock

    def read() -> tuple[int, int]:
        return int(state.reduced.numpy()), int(state.reached.numpy())

    try:
        with heartbeat(job.run_dir, job.setup, job.cfg.cluster, is_chief=job.is_chief,
                       read=read, record=trainer.record, cluster=job.cluster) as beat:
            trainer.heartbeat = beat
            outcome = trainer.run(start_step)
        clock.switch("teardown")
        trainer.writers.close()  # the writing thread's points, and its error if any
    except BaseException as err:
        clock.switch("teardown")
        failed(err, int(state.step.numpy()), trainer.record, trainer.writers, clock,
               job.cluster)
        raise
    return outcome


def _counted(job: _Job, model: Any, features: Any) -> Plan:
    """The plan with the model's FLOPs (TensorFlow's count) and the replicas' peak, said once."""
    from distagent.flops import counted_plan, flops_text, model_forward_flops, peak_text

    plan, unknown = counted_plan(job.cfg, job.plan, model_forward_flops(model, features),
                                 hosts=job.setup.hosts)
    for warning in unknown:
        job.progress.message(terminal_text(f"warning: {warning}"))
    job.progress.message(terminal_text(f"{flops_text(plan)}; peak {peak_text(plan)}"))
    return plan


def _health(cfg: JobConfig) -> Health:
    return Health(clip_norm=cfg.optimizer.clip_norm,
                  non_finite_gradient_diverges=not cfg.train.mixed_precision)
