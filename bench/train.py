"""Training throughput of `distagent` against Keras' own `model.fit`, and the pipeline's worth.

1. distagent's loop against `model.fit` (the anchor): the same model (builtin `mlp`, 128-64), data
   (quickstart's synthetic set through distagent's optimized pipeline), global batch, optimizer,
   learning-rate schedule and strategy (MirroredStrategy on 2 CPU replicas), XLA off for both.
   Target: at least 1.0x.
2. distagent with the optimized pipeline against the naive one (the anchor) when preprocessing
   costs about as much as a step: overlapping the two bounds the gain at 2x. Target: 1.5x.

3. Training health: the step with `perf/grad_norm` (the step all-reduces the gradient itself and
   takes its global norm) against the step without it (the anchor: the optimizer all-reduces),
   per step, in one process. Target: the norm costs under 2% of the step. And whole jobs with
   `histogram_every_steps` = N against the same job without histograms (the cost is reported).

Each measurement is examples/s from the end of the first `log_every` steps (compilation done) to
the last step, with no validation and no checkpoints in between; the median of `--runs` runs,
alternating the two sides. Everything runs in this one process.

    .venv/bin/python bench/train.py [--runs 3] [--steps 600] [--health-only]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "shared"), str(ROOT / "agent")]
REPLICAS = 2
PER_REPLICA = 32
LOG_EVERY = 20


def _config(logdir: Path, name: str, steps: int, *, optimize: bool = True,
            cost_ms: float = 0.0, histogram_every: int = 0) -> Any:
    from distagent.config import load_config

    settings = {
        "run.logdir": str(logdir), "run.name": name,
        "strategy.cpu_replicas": REPLICAS, "data.per_replica_batch_size": PER_REPLICA,
        "data.validation_fraction": 0.0,
        "data.synthetic.num_examples": steps * REPLICAS * PER_REPLICA,
        "data.optimize": str(optimize).lower(), "data.synthetic.preprocess_cost_ms": cost_ms,
        "train.epochs": 1, "train.log_every_steps": LOG_EVERY, "train.checkpoint_every_steps": 0,
        # The small MLP: its step is short, so the loop's own overhead shows (a wide model
        # measures the same maths on both sides), and `--cost-ms` is sized to its step.
        "model.hidden_units": "[128, 64]",
        "train.histogram_every_steps": histogram_every,
    }
    overrides = [f"{key}={value}" for key, value in settings.items()]
    return load_config(ROOT / "sample_configs" / "quickstart.toml", overrides)


def _timed_progress() -> Any:
    from distagent.train.progress import Progress

    class Clock(Progress):
        def __init__(self) -> None:
            super().__init__(io.StringIO(), tty=False)
            self.marks: list[tuple[int, float]] = []

        def update(self, step: int, total: int, epoch: int, epochs: int, scalars: Any) -> None:
            self.marks.append((step, time.perf_counter()))

    return Clock()


def _rate(first: tuple[int, float], last: tuple[int, float]) -> float:
    return (last[0] - first[0]) * REPLICAS * PER_REPLICA / (last[1] - first[1])


def distagent_rate(cfg: Any, logdir: Path, waits: list[float] | None = None,
                   after: int = 0) -> float:
    """examples/s (from the first log point past step `after`); appends the run's median
    perf/input_wait_fraction to `waits`."""
    from distagent.train import run_job
    from distcore import names
    from distcore.events import load_once

    clock = _timed_progress()
    run_dir = logdir / f"{cfg.run.name}-{time.monotonic_ns()}"
    run_job(cfg, run_dir=run_dir, progress=clock)
    if waits is not None:
        (train,) = [r for r in load_once([run_dir]) if r.name == names.TRAIN_DIR]
        series = train.scalars.get(names.INPUT_WAIT_FRACTION)
        if series is not None and len(series.values) > 1:  # else: every interval compiled
            waits.append(statistics.median(series.values[1:]))
    first = next(m for m in clock.marks if m[0] > after)
    return _rate(first, clock.marks[-1])


def _median_or_na(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "n/a (no run logged input wait)"


def keras_fit_rate(cfg: Any) -> float:
    import keras

    from distagent.devices import resolve_strategy
    from distagent.models import build_model
    from distagent.pipeline import build_input, plan_for
    from distagent.train.job import make_optimizer
    from distagent.train.schedule import WarmupDecay

    setup = resolve_strategy(cfg.strategy)
    plan = plan_for(cfg, replicas=setup.replicas, devices=setup.devices)
    data = build_input(cfg, plan, strategy=setup.strategy)
    schedule = WarmupDecay(base_rate=plan.base_learning_rate, scaled_rate=plan.learning_rate,
                           warmup_steps=plan.warmup_steps, total_steps=plan.total_steps)
    keras.utils.set_random_seed(cfg.run.seed)
    with setup.strategy.scope():
        model = build_model(
            cfg.model.name, data.input_shape, data.num_classes,
            hidden_units=cfg.model.hidden_units,
        )
        model.compile(
            optimizer=make_optimizer(cfg.optimizer.name, schedule),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"], jit_compile=False,
        )
    marks: list[tuple[int, float]] = []

    class Clock(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if (batch + 1) % LOG_EVERY == 0 or batch + 1 == plan.total_steps:
                marks.append((batch + 1, time.perf_counter()))

    model.fit(data.train, epochs=1, steps_per_epoch=plan.total_steps, verbose=0, shuffle=False,
              callbacks=[Clock()])
    return _rate(marks[0], marks[-1])


def _median_pair(runs: int, first: Any, second: Any) -> tuple[float, float, list[str]]:
    """Medians of both sides, and lines with each run and the median of the per-run ratios
    (a run's two sides are measured back to back, so a shared machine's load drifts less)."""
    a, b, lines = [], [], []
    for i in range(runs):
        a.append(first())
        b.append(second())
        lines.append(f"  run {i + 1}: {a[-1]:,.0f} vs {b[-1]:,.0f} examples/s "
                     f"({a[-1] / b[-1]:.2f}x)")
    ratios = statistics.median(x / y for x, y in zip(a, b, strict=True))
    lines.append(f"  median of the per-run ratios: {ratios:.2f}x")
    return statistics.median(a), statistics.median(b), lines


def step_ms(cfg: Any, grad_norm: bool, steps: int) -> float:
    """Milliseconds per step of distagent's compiled step (n = LOG_EVERY steps per call, as the
    loop runs them) after a warm-up call, with or without the gradient-health part."""
    import keras

    from distagent.devices import resolve_strategy
    from distagent.models import build_model
    from distagent.pipeline import build_input, plan_for
    from distagent.train.job import make_optimizer
    from distagent.train.schedule import WarmupDecay
    from distagent.train.steps import Health, TrainState, TrainStep

    setup = resolve_strategy(cfg.strategy)
    plan = plan_for(cfg, replicas=setup.replicas, devices=setup.devices)
    data = build_input(cfg, plan, strategy=setup.strategy)
    schedule = WarmupDecay(base_rate=plan.base_learning_rate, scaled_rate=plan.learning_rate,
                           warmup_steps=plan.warmup_steps, total_steps=plan.total_steps)
    keras.utils.set_random_seed(cfg.run.seed)
    with setup.strategy.scope():
        model = build_model(cfg.model.name, data.input_shape, data.num_classes,
                            hidden_units=cfg.model.hidden_units)
        optimizer = make_optimizer(cfg.optimizer.name, schedule)
        optimizer.build(model.trainable_variables)
    state = TrainState.create()
    step = TrainStep(setup.strategy, model, optimizer, state,
                     global_batch_size=plan.global_batch_size, health=Health(grad_norm=grad_norm))
    iterator = iter(setup.strategy.experimental_distribute_dataset(data.train.repeat()))
    step(iterator, LOG_EVERY)
    state.read(state.interval)  # waits for the warm-up
    calls = max(1, steps // LOG_EVERY)
    start = time.perf_counter()
    for _ in range(calls):
        step(iterator, LOG_EVERY)
    state.read(state.interval)  # waits for the last step
    return 1000.0 * (time.perf_counter() - start) / (calls * LOG_EVERY)


def health(runs: int, steps: int, logdir: Path) -> bool:
    """Part 3; True when the norm's cost is within its target."""
    cfg = _config(logdir, "health", steps)
    with_norm, without = [], []
    for _ in range(runs):
        with_norm.append(step_ms(cfg, True, steps))
        without.append(step_ms(cfg, False, steps))
    cost = statistics.median(a / b for a, b in zip(with_norm, without, strict=True)) - 1.0
    print("perf/grad_norm (all-reduce in the step + global norm) vs the step without it:")
    for a, b in zip(with_norm, without, strict=True):
        print(f"  run: {a:.3f} vs {b:.3f} ms/step ({a / b:.3f}x)")
    print(f"  median step: {statistics.median(with_norm):.3f} vs {statistics.median(without):.3f}"
          f" ms; the norm costs {cost:+.1%} of the step (target < 2%)")
    plain = _config(logdir, "nohist", steps)
    every = {n: _config(logdir, f"hist{n}", steps, histogram_every=n) for n in (100, 20)}
    rates: dict[int, list[float]] = {0: [], **{n: [] for n in every}}
    # From past the first histogram write: its one-time tracing (about 2 s: the write and the
    # step that keeps its gradient compile once) is not the cost per write.
    first = max(every)
    for _ in range(runs):
        rates[0].append(distagent_rate(plain, logdir, after=first))
        for n, c in every.items():
            rates[n].append(distagent_rate(c, logdir, after=first))
    base = statistics.median(rates[0])
    print("histograms of every variable and gradient (mlp: 6 tensors, 12 histograms a write),")
    print(f"  from step {first} on (the first write's one-time tracing excluded):")
    for n in every:
        ratio = statistics.median(a / b for a, b in zip(rates[n], rates[0], strict=True))
        print(f"  every {n} steps: {statistics.median(rates[n]):,.0f} vs {base:,.0f} examples/s;"
              f" costs {1 - ratio:+.1%} of the throughput")
    return cost < 0.02


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--cost-ms", type=float, default=0.15,
                        help="preprocessing per example for part 2 (about a step's cost)")
    parser.add_argument("--health-only", action="store_true",
                        help="only part 3 (gradient norm and histograms)")
    args = parser.parse_args()
    import tensorflow as tf

    from distagent.devices import split_cpu

    split_cpu(tf, REPLICAS)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        logdir = Path(tmp)
        if args.health_only:
            return 0 if health(args.runs, args.steps, logdir) else 1
        cfg = _config(logdir, "loop", args.steps)
        ours, anchor, lines = _median_pair(
            args.runs, lambda: distagent_rate(cfg, logdir), lambda: keras_fit_rate(cfg)
        )
        ratio = ours / anchor
        failed |= ratio < 1.0
        print("distagent vs keras model.fit (mlp, batch 32 x 2 CPU replicas):", *lines, sep="\n")
        print(f"  median: distagent {ours:,.0f}, model.fit {anchor:,.0f} examples/s; "
              f"ratio {ratio:.2f}x (target >= 1.0x)")
        fast = _config(logdir, "optimized", args.steps, cost_ms=args.cost_ms)
        slow = _config(logdir, "naive", args.steps, optimize=False, cost_ms=args.cost_ms)
        naive_waits: list[float] = []
        opt, naive, lines = _median_pair(
            args.runs, lambda: distagent_rate(fast, logdir),
            lambda: distagent_rate(slow, logdir, naive_waits),
        )
        ratio = opt / naive
        failed |= ratio < 1.5
        print(f"optimized vs naive pipeline ({args.cost_ms} ms preprocessing per example):",
              *lines, sep="\n")
        print(f"  median: optimized {opt:,.0f}, naive {naive:,.0f} examples/s; "
              f"ratio {ratio:.2f}x (target >= 1.5x)")
        # Ground truth for input wait: the naive job's step minus the same job's step when its
        # input costs nothing (the same model fed from memory) is what its input really costs.
        free_waits: list[float] = []
        free = statistics.median(distagent_rate(cfg, logdir, free_waits) for _ in range(args.runs))
        truth = max(0.0, 1.0 - naive / free)
        print("input wait, measured vs ground truth (1 - free-input step / naive step):")
        print(f"  naive, {args.cost_ms} ms per example: measured "
              f"{_median_or_na(naive_waits)}, truth {truth:.2f}")
        print(f"  in-memory (the step's own cost only): measured {_median_or_na(free_waits)}, "
              "truth 0")
        failed |= not health(args.runs, args.steps, logdir)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
