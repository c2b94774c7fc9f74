"""Input pipeline throughput: the optimized tf.data pipeline against the naive one (the anchor),
both measured by `distagent bench-input` in the same run, on every sample config.

Targets: a latency-bound source (sample_configs/latency_bound.toml, 2 ms per read) at least 3x;
CPU-bound preprocessing (sample_configs/input_bound.toml, 1 ms of CPU per example) at least 1.5x,
which needs two free cores; and never slower than naive on any sample config. Prints the median
of several runs per config. Exit status 1 if the optimized pipeline is slower than the naive one
anywhere or a target is missed.

    .venv/bin/python bench/pipeline.py [--runs 3] [--batches 40] [CONFIG_NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_configs"
TARGETS = {"latency_bound": 3.0, "input_bound": 1.5}


def bench_once(config: Path, overrides: list[str], batches: int) -> dict[str, object]:
    command = [sys.executable, "-m", "distagent", "bench-input", str(config), "--json",
               "--batches", str(batches)]
    for item in overrides:
        command += ["--set", item]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{config.name}: bench-input failed:\n{done.stderr[-2000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def tfrecord_files(workdir: Path) -> list[str]:
    """The tfrecord sample needs files: export the quickstart data into `workdir`."""
    prefix = workdir / "train"
    subprocess.run([sys.executable, "-m", "distagent.data.tfrecord",
                    str(SAMPLES / "quickstart.toml"), str(prefix), "--files", "8"],
                   check=True, capture_output=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    return [f"data.tfrecord.files={prefix}-*.tfrecord"]


def median_of(runs: list[dict[str, object]], name: str, key: str) -> float:
    return statistics.median(float(r[name][key]) for r in runs)  # type: ignore[index]


def main() -> int:
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
            if args.configs and name not in args.configs:
                continue
            overrides = tfrecord_files(Path(tmp)) if name == "tfrecord" else []
            runs = [bench_once(config, overrides, args.batches) for _ in range(args.runs)]
            ratio = statistics.median(float(r["ratio"]) for r in runs)  # type: ignore[arg-type]
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
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
