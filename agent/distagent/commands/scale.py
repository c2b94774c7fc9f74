"""`distagent scale CONFIG --replicas 1,2,4 [--steps N] [--json]`: how throughput grows with the
replicas when the per-replica batch is fixed (global batch and learning rate as the plan scales
them), the claim data-parallel training rests on (Goyal et al.: about 90% scaling efficiency).

Each replica count trains in its own process: TensorFlow fixes its logical devices when it
starts, so one process cannot split the CPU into 1, then 2, then 4 devices (and on GPUs a fresh
process starts from the same state each time). A child warms up (traces the step, fills the
shuffle buffer), then times `--steps` steps; input wait is the step's own in-graph measure (see
distagent.train.steps). Every count's figures also go into a TensorBoard run,
`<logdir>/<name>-scale/`, at step = replica count, so distmon and TensorBoard chart them; a rerun
gets a run of its own (`<name>-scale-2`, `-3`, ...), since its points at the same steps would
otherwise replace the first run's as a restart.

Bounds: at most MAX_REPLICAS replicas (the `strategy.cpu_replicas` limit) and MAX_STEPS steps, so
a typo is one line, not minutes of grinding. SIGTERM, SIGHUP or Ctrl-C stop the child that is
training (and the child dies with its parent where Linux can arrange it): never an orphan.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from distagent.config import load_config, replace_in
from distagent.config_rules import MAX_CPU_REPLICAS
from distagent.schema import JobConfig
from distcore import names
from distcore.cli_parser import OneLineParser
from distcore.errors import DistmonError
from distcore.process import stop_child
from distcore.textsafe import terminal_text
from distcore.wording import counted

WARMUP_STEPS = 5
SCALE_SUFFIX = "-scale"
INPUT_WAIT_RISE = 0.02
"""Input wait that grows by more than this from the fewest to the most replicas, ending at least
moderately input-bound, means the input pipeline is what limits scaling."""
RUN_FIELDS = ("replicas", "global_batch_size", "learning_rate", "examples_per_second",
              "step_time_ms", "input_wait_fraction", "scaling_efficiency")


MAX_REPLICAS = MAX_CPU_REPLICAS
MAX_STEPS = 100_000
MAX_RERUNS = 10_000
_COUNT = re.compile(r"\s*[0-9]{1,6}\s*")
SHOWN = 60  # characters of the user's text in an error line


def parse_replicas(text: str) -> list[int]:
    """"1,2,4" -> [1, 2, 4] (sorted, without repeats); DistmonError on anything else, each count
    1 to MAX_REPLICAS in ASCII digits."""
    parts = [part for part in text.split(",") if part.strip()]
    if not parts or len(parts) > MAX_REPLICAS or not all(_COUNT.fullmatch(p) for p in parts):
        raise DistmonError(f"--replicas: expected counts like 1,2,4, got "
                           f"{terminal_text(repr(text), SHOWN)}")
    counts = sorted({int(part) for part in parts})
    if counts[0] < 1 or counts[-1] > MAX_REPLICAS:
        raise DistmonError(f"--replicas: each count must be 1 to {MAX_REPLICAS} (the "
                           f"strategy.cpu_replicas limit), got {terminal_text(repr(text), SHOWN)}")
    return counts


def check_steps(steps: int) -> int:
    if not 1 <= steps <= MAX_STEPS:
        raise DistmonError(f"--steps: expected 1 to {MAX_STEPS:,} timed steps, got {steps}")
    return steps


def run(args: argparse.Namespace) -> int:
    counts = parse_replicas(args.replicas)
    check_steps(args.steps)
    cfg = load_config(Path(args.config), args.overrides)  # refuse a bad config before any run
    run_dir = new_scale_run_dir(cfg)
    runs: list[dict[str, Any]] = []
    try:
        with _stopped_by_signals():
            for count in counts:
                if not args.json:
                    print(f"training {counted(args.steps, 'step')} on "
                          f"{counted(count, 'replica')}...",
                          file=sys.stderr)
                base = next((r["examples_per_second"] for r in runs if r["replicas"] == 1), None)
                runs.append(_measure_in_child(args, count, base, run_dir))
    except BaseException:
        with contextlib.suppress(OSError):  # nothing measured: leave no empty run behind
            run_dir.rmdir()
        raise
    document = scale_document(str(args.config), runs, steps=args.steps,
                              per_replica=cfg.data.per_replica_batch_size)
    document["logdir"] = str(run_dir)
    print(json.dumps(document) if args.json else format_document(document))
    return 0


def scale_run_dir(cfg: JobConfig) -> Path:
    return Path(cfg.run.logdir) / f"{cfg.run.name}{SCALE_SUFFIX}"


def new_scale_run_dir(cfg: JobConfig) -> Path:
    """The first of `<name>-scale`, `<name>-scale-2`, ... that does not exist yet, created now
    (mkdir is atomic: two `scale`s at once get two runs)."""
    first = scale_run_dir(cfg)
    first.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, MAX_RERUNS + 1):
        candidate = first if n == 1 else first.with_name(f"{first.name}-{n}")
        with contextlib.suppress(FileExistsError):
            candidate.mkdir()
            return candidate
    raise DistmonError(f"{terminal_text(first)}: {MAX_RERUNS} scale runs already; remove some")


class Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise `Stopped` in the main thread (the child is stopped on the way
    out, see `_measure_in_child`); the command then exits 128 + the signal, in one line."""
    def handler(signum: int, _frame: FrameType | None) -> None:
        signal.signal(signum, signal.SIG_IGN)  # a second one must not cut the clean-up short
        raise Stopped(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    except Stopped as stop:
        err = DistmonError(f"scale: stopped by {stop} (the training child was stopped too)")
        err.exit_code = 128 + stop.signum
        raise err from None
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGHUP})


def _die_with_parent() -> None:
    """In the child, before exec: Linux sends it SIGTERM when `scale` dies, even by SIGKILL;
    and the stop signals the parent held back while it started the child are let through."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    if sys.platform == "linux":
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _measure_in_child(args: argparse.Namespace, count: int, base: float | None,
                      run_dir: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "distagent.commands.scale", str(args.config),
               "--child-replicas", str(count), "--steps", str(args.steps),
               "--run-dir", str(run_dir)]
    if base is not None:
        command += ["--base-examples-per-second", repr(base)]
    for override in args.overrides:
        command += ["--set", override]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}
    # A stop that came while Popen ran (the child started, `child` not yet bound) would leave the
    # child running: the signals wait until there is a child to stop.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env, stdin=subprocess.DEVNULL,
                                 preexec_fn=_die_with_parent)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        out, err = child.communicate()
    finally:  # a signal or Ctrl-C while it trains: stop it, never leave it to init
        stop_child(child, timeout=10)
    lines = out.strip().splitlines()
    if child.returncode != 0 or not lines:
        errors = [line for line in err.strip().splitlines() if line.strip()]
        last = errors[-1] if errors else f"exit status {child.returncode}"
        raise DistmonError(f"{counted(count, 'replica')}: {last.removeprefix('distagent: ')}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def scale_document(config: str, runs: list[dict[str, Any]], *, steps: int,
                   per_replica: int) -> dict[str, Any]:
    """The `--json` document: per-count figures, efficiency against 1 replica, and notes."""
    base = next((r["examples_per_second"] for r in runs if r["replicas"] == 1), None)
    out_runs = []
    for r in runs:
        efficiency = (r["examples_per_second"] / (r["replicas"] * base)) if base else None
        out_runs.append({**{k: r[k] for k in RUN_FIELDS[:-1]}, "scaling_efficiency": efficiency,
                         "devices": r["devices"]})
    kind = runs[0]["device_kind"] if runs else "CPU"
    return {"version": 1, "config": config, "device_kind": kind, "steps": steps,
            "per_replica_batch_size": per_replica, "runs": out_runs,
            "notes": scale_notes(kind, out_runs, os.cpu_count() or 1)}


def scale_notes(kind: str, runs: Sequence[dict[str, Any]], cores: int) -> list[str]:
    notes = []
    if len(runs) >= 2:
        first, last = runs[0], runs[-1]
        rise = last["input_wait_fraction"] - first["input_wait_fraction"]
        if rise > INPUT_WAIT_RISE and last["input_wait_fraction"] >= names.INPUT_WAIT_MODERATE:
            notes.append(
                f"input wait rises from {first['input_wait_fraction']:.0%} at "
                f"{first['replicas']} to {last['input_wait_fraction']:.0%} at {last['replicas']} "
                "replicas: the input pipeline is the limit (parallel map, cache, prefetch; "
                "`distagent bench-input` measures it alone)")
    if kind == "CPU" and any(r["replicas"] > 1 for r in runs):
        notes.append(
            f"the replicas are logical devices on the same {counted(cores, 'CPU core')}: "
            "they share "
            "those cores, so an efficiency near 1/N is what this machine can do and says "
            "nothing about how GPUs would scale")
    return notes


def format_document(doc: dict[str, Any]) -> str:
    lines = [f"{doc['config']}: {counted(doc['steps'], 'step')} per count, "
             f"{counted(doc['per_replica_batch_size'], 'example')} per replica, "
             f"on {doc['device_kind']}",
             f"{'replicas':>8} {'global batch':>12} {'lr':>9} {'examples/s':>11} "
             f"{'step ms':>8} {'input wait':>10} {'efficiency':>10}"]
    for r in doc["runs"]:
        efficiency = "-" if r["scaling_efficiency"] is None else f"{r['scaling_efficiency']:.0%}"
        lines.append(f"{r['replicas']:>8} {r['global_batch_size']:>12} "
                     f"{r['learning_rate']:>9.4g} {r['examples_per_second']:>11,.0f} "
                     f"{r['step_time_ms']:>8.1f} {r['input_wait_fraction']:>10.1%} "
                     f"{efficiency:>10}")
    lines.extend(f"note: {note}" for note in doc["notes"])
    lines.append(f"TensorBoard run: {doc['logdir']} (step = replicas)")
    return "\n".join(lines)


def _child_config(cfg: JobConfig, count: int, gpus: int) -> JobConfig:
    if gpus == 0:
        return replace_in(cfg, strategy__kind="mirrored", strategy__devices=(),
                          strategy__cpu_replicas=count)
    if count > gpus:
        raise DistmonError(f"{counted(count, 'replica')} asked for, but this machine has "
                           f"{counted(gpus, 'GPU')}")
    devices = tuple(f"GPU:{i}" for i in range(count))
    return replace_in(cfg, strategy__kind="mirrored", strategy__devices=devices)


def measure(cfg: JobConfig, count: int, steps: int) -> dict[str, Any]:
    """Train WARMUP_STEPS, then time `steps` steps at `count` replicas (in this process)."""
    import keras
    import tensorflow as tf

    from distagent.devices import resolve_strategy
    from distagent.model_check import checked_objective, job_model
    from distagent.pipeline import build_input, plan_for
    from distagent.train.job import make_optimizer
    from distagent.train.schedule import WarmupDecay
    from distagent.train.steps import TrainState, TrainStep

    gpus = len(tf.config.list_physical_devices("GPU"))
    cfg = _child_config(cfg, count, gpus)
    if cfg.train.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_float16")
    setup = resolve_strategy(cfg.strategy)
    plan = plan_for(cfg, replicas=setup.replicas, devices=setup.devices)
    data = build_input(cfg, plan)
    schedule = WarmupDecay(base_rate=plan.base_learning_rate, scaled_rate=plan.learning_rate,
                           warmup_steps=plan.warmup_steps, total_steps=plan.total_steps,
                           decay=cfg.optimizer.decay)
    with setup.strategy.scope():
        model = job_model(cfg, data.source, data.element_spec,
                          sync_batchnorm=cfg.model.sync_batchnorm)
        optimizer = make_optimizer(cfg.optimizer.name, schedule,
                                   mixed_precision=cfg.train.mixed_precision)
        optimizer.build(model.trainable_variables)
    objective = checked_objective(cfg, model, data.source, data.element_spec)
    state = TrainState.create(objective.counter_names())
    step = TrainStep(setup.strategy, model, optimizer, state,
                     global_batch_size=plan.global_batch_size, jit_compile=cfg.train.jit_compile,
                     objective=objective)
    iterator = iter(setup.strategy.experimental_distribute_dataset(data.train))
    for _ in range(WARMUP_STEPS):
        step(iterator, 1)
    state.read(state.interval)  # waits for the warm-up steps
    state.reset(state.interval)
    start = time.perf_counter()
    for _ in range(steps):
        step(iterator, 1)
    wait = state.read(state.interval)["wait_seconds"]  # waits for the last step
    wall = time.perf_counter() - start
    return {"replicas": setup.replicas, "global_batch_size": plan.global_batch_size,
            "learning_rate": plan.learning_rate,
            "examples_per_second": steps * plan.global_batch_size / wall,
            "step_time_ms": 1000.0 * wall / steps, "input_wait_fraction": min(1.0, wait / wall),
            "device_kind": "GPU" if gpus else "CPU", "devices": list(setup.devices)}


def write_point(run_dir: Path, result: dict[str, Any], base: float | None) -> None:
    """The count's figures as TensorBoard scalars at step = replicas."""
    import tensorflow as tf

    scalars = {f"scale/{k}": float(result[k]) for k in RUN_FIELDS[1:-1]}
    if base:
        scalars["scale/scaling_efficiency"] = (result["examples_per_second"]
                                               / (result["replicas"] * base))
    writer = tf.summary.create_file_writer(str(run_dir))
    with writer.as_default(step=int(result["replicas"])):
        for tag, value in scalars.items():
            tf.summary.scalar(tag, value)
    writer.close()


def child_main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m distagent.commands.scale")
    parser.add_argument("config")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--child-replicas", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--base-examples-per-second", type=float, default=None)
    parser.add_argument("--run-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        cfg = load_config(Path(args.config), args.overrides)
        result = measure(cfg, args.child_replicas, args.steps)
        write_point(args.run_dir or scale_run_dir(cfg), result, args.base_examples_per_second)
    except DistmonError as err:
        print(f"distagent: {err}", file=sys.stderr)
        return err.exit_code
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
