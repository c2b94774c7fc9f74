"""Soak the training agent: a MirroredStrategy job and a two-worker `launch-local` job over tens
of thousands of fast steps, logging often, with each process's threads and memory (RSS) at the
start and at the end.

A job that runs for days must hold a constant number of threads and flat memory, whatever its
step rate and however many points it logs. Both are read from outside the agent: threads from
the kernel's list (/proc/PID/task: TensorFlow's C++ threads too) and RSS from psutil. "start" is
the first log point past `--warmup` steps (graphs traced, pipelines filled), "end" the last one
seen before the job ended. Exits 1 when a job fails, its threads grow by more than
`--max-thread-growth` or its RSS by more than `--max-rss-growth-kb` per thousand log points or
per thousand steps.

Run: .venv/bin/python bench/agent_soak.py [--steps 20000] [--log-every 5] [--jobs mirrored,multi]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
BASE = """
[run]
name = "soak"
logdir = "{logdir}"
[strategy]
kind = "{kind}"
cpu_replicas = 2
[data]
source = "synthetic"
per_replica_batch_size = 8
validation_fraction = 0.0
[data.synthetic]
num_examples = 256
num_classes = 4
input_shape = [8]
[model]
name = "mlp"
hidden_units = [16]
[train]
epochs = 1
steps_per_epoch = {steps}
log_every_steps = {log_every}
checkpoint_every_steps = 0
[telemetry]
interval_seconds = 1.0
"""


@dataclass
class Sample:
    step: int
    threads: list[int]
    rss_mib: list[float]


def read_record(run_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def trainers(proc: subprocess.Popen[bytes], multi: bool) -> list[psutil.Process]:
    """The training processes: the launcher's workers, or the `distagent start` itself."""
    if not multi:
        return [psutil.Process(proc.pid)]
    found = []
    for child in psutil.Process(proc.pid).children():
        try:
            if "--task-index" in child.cmdline():
                found.append(child)
        except psutil.Error:
            pass
    return found


def sample(step: int, procs: list[psutil.Process]) -> Sample | None:
    try:
        threads = [len(os.listdir(f"/proc/{p.pid}/task")) for p in procs]
        rss = [p.memory_info().rss / 2**20 for p in procs]
    except (OSError, psutil.Error):
        return None
    return Sample(step, threads, rss)


def soak(kind: str, args: argparse.Namespace, workdir: Path) -> tuple[Sample, Sample, int]:
    multi = kind == "multi"
    logdir = workdir / kind
    config = workdir / f"{kind}.toml"
    config.write_text(BASE.format(logdir=logdir, steps=args.steps, log_every=args.log_every,
                                  kind="multi_worker" if multi else "mirrored"))
    command = [sys.executable, "-m", "distagent",
               *(["launch-local", str(config), "--workers", "2"] if multi
                 else ["start", str(config)])]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "shared"), str(ROOT / "agent"), os.environ.get("PYTHONPATH", "")])}
    run_dir = logdir / "soak"
    with open(workdir / f"{kind}.log", "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    first = last = None
    try:
        while proc.poll() is None:
            record = read_record(run_dir)
            step = record.get("last_step")
            procs = trainers(proc, multi)
            if isinstance(step, int) and step >= args.warmup and not record.get("end_time") \
                    and len(procs) == (2 if multi else 1):
                now = sample(step, procs)
                if now is not None:
                    first = first or now
                    last = now
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
    if first is None or last is None:
        raise SystemExit(f"{kind}: no sample (see {workdir / (kind + '.log')})")
    return first, last, int(proc.returncode)


def report(kind: str, first: Sample, last: Sample, code: int, args: argparse.Namespace) -> bool:
    points = max(1, (last.step - first.step) // args.log_every)
    ok = code == 0
    for i, (t0, t1, r0, r1) in enumerate(zip(first.threads, last.threads, first.rss_mib,
                                              last.rss_mib, strict=True)):
        per_k = (r1 - r0) * 1024 / points * 1000
        per_ksteps = (r1 - r0) * 1024 / max(1, last.step - first.step) * 1000
        good = t1 - t0 <= args.max_thread_growth and per_k <= args.max_rss_growth_kb \
            and per_ksteps <= args.max_rss_growth_kb
        ok = ok and good
        print(f"{kind:8} process {i}: steps {first.step}->{last.step} ({points} log points): "
              f"threads {t0} -> {t1}, RSS {r0:.1f} -> {r1:.1f} MiB ({per_k:+.0f} KiB per "
              f"1,000 points, {per_ksteps:+.0f} per 1,000 steps) {'ok' if good else 'GROWS'}")
    if code != 0:
        print(f"{kind:8} exited with code {code}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--jobs", default="mirrored,multi")
    parser.add_argument("--max-thread-growth", type=int, default=20)
    parser.add_argument("--max-rss-growth-kb", type=float, default=2048.0,
                        help="KiB per 1,000 log points and per 1,000 steps (the per-point leak "
                        "this guards against: ~5,700)")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="agent-soak-") as tmp:
        for kind in args.jobs.split(","):
            if kind not in ("mirrored", "multi"):
                parser.error(f"--jobs: unknown job {kind!r} (mirrored, multi)")
            started = time.monotonic()
            first, last, code = soak(kind, args, Path(tmp))
            ok = report(kind, first, last, code, args) and ok
            print(f"{kind:8} took {time.monotonic() - started:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
