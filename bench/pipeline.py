"""Input pipeline throughput: the optimized tf.data pipeline against the naive one (the anchor),
both measured by `distagent bench-input` in the same run, on every sample config.

Targets: a latency-bound source (sample_configs/latency_bound.toml, 2 ms per read) at least 3x;
CPU-bound preprocessing (sample_configs/input_bound.toml, 1 ms of CPU per example) at least 1.5x,
which needs two free cores; and never slower than naive on any sample config. Prints the median
of several runs per config. Exit status 1 if the optimized pipeline is slower than the naive one
anywhere or a target is missed.

The image workload (`images`) times whole epochs of sample_configs/images.toml on 256x256 JPEGs
written for the run (1024 training images), each pipeline in its own process, alternating: the
first epoch (decode, resize and augment, parallel against sequential; the clock starts when the
pipeline is built, so it includes filling the shuffle buffer, where both decode) and the next
three (the optimized pipeline reads its cache and only augments) apart. Targets: >= 2x in the
first epoch, >= 5x after it.

    .venv/bin/python bench/pipeline.py [--runs 3] [--batches 40] [CONFIG_NAME ... | images]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

if TYPE_CHECKING:  # distagent's imports bring TensorFlow: the children import it, not main()
    from distagent.schema import JobConfig

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_configs"
TARGETS = {"latency_bound": 3.0, "input_bound": 1.5}
IMAGES_CONFIG = SAMPLES / "images.toml"

Pipeline = Literal["optimized", "naive"]
Figure = Literal["examples_per_second", "first_batch_seconds", "cpu_cores"]


class Timing(TypedDict):
    """One pipeline's figures in `distagent bench-input --json` (its Timing, as a dict)."""

    examples_per_second: float
    batches_per_second: float
    first_batch_seconds: float
    total_seconds: float
    cpu_cores: float


class BenchInput(TypedDict):
    """What `distagent bench-input --json` prints (distagent.commands.bench_input.bench)."""

    config: str
    batches: int
    replicas: int
    global_batch_size: int
    optimized: Timing
    naive: Timing
    ratio: float


def bench_once(config: Path, overrides: list[str], batches: int) -> BenchInput:
    command = [sys.executable, "-m", "distagent", "bench-input", str(config), "--json",
               "--batches", str(batches)]
    for item in overrides:
        command += ["--set", item]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{config.name}: bench-input failed:\n{done.stderr[-2000:]}")
    result: BenchInput = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def tfrecord_files(workdir: Path) -> list[str]:
    """The tfrecord sample needs files: export the quickstart data into `workdir`."""
    prefix = workdir / "train"
    subprocess.run([sys.executable, "-m", "distagent.data.tfrecord",
                    str(SAMPLES / "quickstart.toml"), str(prefix), "--files", "8"],
                   check=True, capture_output=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    return [f"data.tfrecord.files={prefix}-*.tfrecord"]


LATER_EPOCHS = 3
IMAGE_TARGETS = {"first_epoch": 2.0, "later_epochs": 5.0}


def time_epochs(directory: str, optimize: bool) -> dict[str, float]:
    """Examples/s of the first epoch and of the next LATER_EPOCHS (in this process)."""
    from distagent.config import load_config
    from distagent.devices import resolve_strategy
    from distagent.pipeline import build_input, plan_for

    # Local disk: the sample's storage latency (the demo's lesson) would swamp the decode timed.
    cfg = load_config(IMAGES_CONFIG, [f"data.images.directory={directory}",
                               f"data.optimize={str(optimize).lower()}", "data.read_latency_ms=0"])
    setup = resolve_strategy(cfg.strategy)
    plan = plan_for(cfg, replicas=setup.replicas, devices=setup.devices)
    if plan.train_examples is None:  # an epoch is what is timed: its size must be known
        raise SystemExit(f"{IMAGES_CONFIG.name}: the image sample's size is unknown")
    steps = plan.train_examples // plan.global_batch_size
    _warm_up(cfg)
    start = time.perf_counter()
    iterator = iter(build_input(cfg, plan).train)
    for _ in range(steps):
        next(iterator)
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(steps * LATER_EPOCHS):
        next(iterator)
    later = time.perf_counter() - start
    examples = steps * plan.global_batch_size
    return {"first_epoch": examples / first, "later_epochs": examples * LATER_EPOCHS / later}


def _warm_up(cfg: JobConfig) -> None:
    """TensorFlow's one-off costs (the first tf.data iterator, the first image ops) before the
    clock starts, as `distagent bench-input` does, so neither pipeline is charged for them."""
    from distagent.data import open_source

    source = open_source(cfg)
    assert source.decode is not None
    for _ in source.read(1).take(2).map(source.decode).cache().shuffle(2).batch(2).prefetch(1):
        pass


def _child(directory: Path, optimize: bool) -> dict[str, float]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, __file__, "--images-child", str(directory),
                           str(optimize)],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"images: the timing child failed:\n{done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def write_images(workdir: Path) -> Path:
    directory = workdir / "images"
    subprocess.run([sys.executable, "-m", "distagent.data.samples", str(directory)], check=True,
                   capture_output=True)
    return directory


def bench_images(workdir: Path, runs: int) -> bool:
    """Print the image workload's medians and ratios; False when a target is missed."""
    directory = write_images(workdir)
    results: dict[str, list[dict[str, float]]] = {"optimized": [], "naive": []}
    for _ in range(runs):
        for name in ("optimized", "naive"):  # alternating: the machine's load hits both
            results[name].append(_child(directory, name == "optimized"))
    ok = True
    print(f"{'images':<15} {'optimized ex/s':>15} {'naive ex/s':>11} {'ratio':>7}  "
          "(sample_configs/images.toml, 256x256 JPEGs -> 16x16, one epoch = 1024 images)")
    for part, target in IMAGE_TARGETS.items():
        fast = statistics.median(r[part] for r in results["optimized"])
        slow = statistics.median(r[part] for r in results["naive"])
        ratios = sorted(o[part] / n[part]
                        for o, n in zip(results["optimized"], results["naive"], strict=True))
        ratio = fast / slow
        ok &= ratio >= target
        print(f"  {part:<13} {fast:>15.0f} {slow:>11.0f} {ratio:>6.2f}x  "
              f"per run {ratios[0]:.2f}-{ratios[-1]:.2f}x  "
              f"{'ok' if ratio >= target else 'BELOW'} (target >= {target:g}x)", flush=True)
    return ok


def median_of(runs: list[BenchInput], name: Pipeline, key: Figure) -> float:
    return statistics.median(r[name][key] for r in runs)


def main() -> int:
    if sys.argv[1:2] == ["--images-child"]:
        print(json.dumps(time_epochs(sys.argv[2], sys.argv[3] == "True")))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("configs", nargs="*", help="sample config names (default: all)")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPUs, load average {load:.1f}; median of {args.runs} runs, "
          f"{args.batches} batches each after the first")
    print(f"{'config':<15} {'optimized ex/s':>15} {'naive ex/s':>11} {'ratio':>7} "
          f"{'first batch opt/naive':>22} {'cores opt/naive':>16}  verdict")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for config in sorted(SAMPLES.glob("*.toml")):
            name = config.stem
            if (args.configs and name not in args.configs) or name.startswith("images"):
                continue  # the image samples are timed by epoch, below
            overrides = tfrecord_files(Path(tmp)) if name == "tfrecord" else []
            runs = [bench_once(config, overrides, args.batches) for _ in range(args.runs)]
            ratio = statistics.median(r["ratio"] for r in runs)
            target = TARGETS.get(name, 1.0)
            ok = ratio >= target
            failed |= not ok
            print(f"{name:<15} {median_of(runs, 'optimized', 'examples_per_second'):>15.0f} "
                  f"{median_of(runs, 'naive', 'examples_per_second'):>11.0f} {ratio:>6.2f}x "
                  f"{median_of(runs, 'optimized', 'first_batch_seconds'):>10.2f}s /"
                  f"{median_of(runs, 'naive', 'first_batch_seconds'):>8.2f}s "
                  f"{median_of(runs, 'optimized', 'cpu_cores'):>9.2f} /"
                  f"{median_of(runs, 'naive', 'cpu_cores'):>5.2f}  "
                  f"{'ok' if ok else 'BELOW'} (target >= {target:g}x)", flush=True)
        if not args.configs or "images" in args.configs:
            failed |= not bench_images(Path(tmp), args.runs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
