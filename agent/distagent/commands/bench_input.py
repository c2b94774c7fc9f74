"""`distagent bench-input CONFIG [--batches N] [--json]`: the input pipeline alone, optimized
and naive side by side: examples/s, batches/s, time to the first batch, and the ratio. It tells
how many steps per second the input can feed before a single step is trained."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from distagent.config import load_config, replace_in
from distagent.schema import JobConfig
from distcore.errors import DistmonError
from distcore.wording import counted


@dataclass(frozen=True)
class Timing:
    examples_per_second: float
    """Steady state: the batches after the first."""
    batches_per_second: float
    first_batch_seconds: float
    """From building the pipeline to the first batch (includes filling the shuffle buffer)."""
    total_seconds: float
    cpu_cores: float
    """Process CPU time / wall time over the steady batches: how many cores the input used."""


def run(args: argparse.Namespace) -> int:
    if args.batches < 1:
        raise DistmonError("--batches: expected at least 1")
    cfg = load_config(Path(args.config), args.overrides)
    result = bench(cfg, args.batches)
    if args.json:
        print(json.dumps(result))
    else:
        print(format_result(result))
    return 0


def bench(cfg: JobConfig, batches: int) -> dict[str, Any]:
    from distagent.devices import resolve_strategy
    from distagent.pipeline import plan_for

    setup = resolve_strategy(cfg.strategy)
    _warm_up(cfg)
    out: dict[str, Any] = {"config": cfg.run.name, "batches": batches, "replicas": setup.replicas}
    for name, optimize in (("optimized", True), ("naive", False)):
        variant = replace_in(cfg, data__optimize=optimize)
        plan = plan_for(variant, replicas=setup.replicas, devices=setup.devices,
                        workers=setup.workers)
        out["global_batch_size"] = plan.global_batch_size
        out[name] = asdict(time_pipeline(variant, plan, batches))
    out["ratio"] = out["optimized"]["examples_per_second"] / out["naive"]["examples_per_second"]
    return out


def _warm_up(cfg: JobConfig) -> None:
    """Pay TensorFlow's one-off costs (the first tf.data iterator, the CPU-cost calibration)
    before timing, so that whichever pipeline is timed first is not charged for them."""
    import tensorflow as tf

    from distagent.data.cost import sort_ms

    if cfg.data.source == "synthetic" and cfg.data.synthetic.preprocess_cost_ms > 0:
        sort_ms()
    tiny = tf.data.Dataset.range(64).cache().shuffle(8).map(
        lambda i: i * 2, num_parallel_calls=tf.data.AUTOTUNE).batch(8).prefetch(1)
    for _ in tiny:
        pass


def time_pipeline(cfg: JobConfig, plan: Any, batches: int) -> Timing:
    from distagent.pipeline import build_input

    start = time.perf_counter()
    iterator = iter(build_input(cfg, plan).train)
    next(iterator)
    first = time.perf_counter() - start
    steady_start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(batches):
        next(iterator)
    steady = max(time.perf_counter() - steady_start, 1e-9)
    cpu = time.process_time() - cpu_start
    return Timing(
        examples_per_second=batches * plan.global_batch_size / steady,
        batches_per_second=batches / steady,
        first_batch_seconds=first,
        total_seconds=first + steady,
        cpu_cores=cpu / steady,
    )


def format_result(result: dict[str, Any]) -> str:
    lines = [f"{result['config']}: {counted(result['batches'], 'batch', 'batches')} of "
             f"{result['global_batch_size']} ({counted(result['replicas'], 'replica')})"]
    lines.append(f"{'pipeline':<10} {'examples/s':>12} {'batches/s':>10} {'first batch':>12} "
                 f"{'CPU cores':>10}")
    for name in ("optimized", "naive"):
        t = result[name]
        lines.append(f"{name:<10} {t['examples_per_second']:>12.0f} "
                     f"{t['batches_per_second']:>10.1f} {t['first_batch_seconds']:>11.2f}s "
                     f"{t['cpu_cores']:>10.2f}")
    lines.append(f"ratio      {result['ratio']:.2f}x (optimized / naive examples/s)")
    return "\n".join(lines)
