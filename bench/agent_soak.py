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

The anchor ("bare", bench/_bare_multi.py) is the same two-worker job in bare TensorFlow, no
distagent, measured the same way and never judged: TensorFlow (2.21) draws a fresh collective
instance key at every call of a compiled step and keeps a native record of each key for the
life of the process, so the bare job's RSS grows ~3.3 KiB per step (its Python heap: ~0.1;
tracemalloc). The agent's collectives keep the keys they were traced with
(distagent.cluster.strategy.reuse_instance_keys): its workers hold flat, as the bare job does
with `--bare-keys traced`. The bare job's growth is printed next to the agent's, so a run shows
what the agent avoids; docs/benchmarks.md has the numbers.

Run: .venv/bin/python bench/agent_soak.py [--steps 20000] [--log-every 5]
     [--jobs mirrored,multi,bare] [--bare-keys fresh|traced]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
BARE = Path(__file__).resolve().parent / "_bare_multi.py"
BARE_TIMEOUT_S = 1800
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


def free_addresses(count: int) -> list[str]:
    """Ports free now, told apart: every probe stays bound until all are picked."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [f"127.0.0.1:{probe.getsockname()[1]}" for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def soak_bare(args: argparse.Namespace, workdir: Path) -> tuple[Sample, Sample, int]:
    """The anchor's two workers (each reads its own RSS and threads at the soak's steps)."""
    addresses = free_addresses(2)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    logs = [workdir / f"bare-{i}.log" for i in range(2)]
    procs = []
    for i, log in enumerate(logs):
        with open(log, "wb") as out:
            procs.append(subprocess.Popen(
                [sys.executable, str(BARE), str(args.steps), str(args.warmup),
                 str(args.log_every), str(i), *addresses, args.bare_keys],
                stdout=out, stderr=subprocess.STDOUT, env=env))
    try:
        codes = [proc.wait(timeout=BARE_TIMEOUT_S) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    try:
        ends = [json.loads([line for line in log.read_text(errors="replace").splitlines()
                            if line.startswith("{")][-1]) for log in logs]
        first, last = (Sample(ends[0][at]["step"], [e[at]["threads"] for e in ends],
                              [e[at]["rss_mib"] for e in ends]) for at in ("first", "last"))
    except (IndexError, KeyError, TypeError, ValueError):
        raise SystemExit(f"bare: no sample (see {logs[0]})") from None
    return first, last, max(codes)


def kib_per_ksteps(first: Sample, last: Sample) -> list[float]:
    return [(r1 - r0) * 1024 / max(1, last.step - first.step) * 1000
            for r0, r1 in zip(first.rss_mib, last.rss_mib, strict=True)]


def report(kind: str, first: Sample, last: Sample, code: int, args: argparse.Namespace) -> bool:
    """Print each process's growth; False when a judged job failed or grew (bare: TensorFlow's
    own growth, printed for comparison, never judged)."""
    points = max(1, (last.step - first.step) // args.log_every)
    ok = code == 0
    for i, (t0, t1, r0, r1) in enumerate(zip(first.threads, last.threads, first.rss_mib,
                                              last.rss_mib, strict=True)):
        per_k = (r1 - r0) * 1024 / points * 1000
        per_ksteps = (r1 - r0) * 1024 / max(1, last.step - first.step) * 1000
        good = kind == "bare" or (t1 - t0 <= args.max_thread_growth
                                  and per_k <= args.max_rss_growth_kb
                                  and per_ksteps <= args.max_rss_growth_kb)
        ok = ok and good
        print(f"{kind:8} process {i}: steps {first.step}->{last.step} ({points} log points): "
              f"threads {t0} -> {t1}, RSS {r0:.1f} -> {r1:.1f} MiB ({per_k:+.0f} KiB per "
              f"1,000 points, {per_ksteps:+.0f} per 1,000 steps) "
              f"{'not judged' if kind == 'bare' else 'ok' if good else 'GROWS'}")
    if code != 0:
        print(f"{kind:8} exited with code {code}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--jobs", default="mirrored,multi,bare")
    parser.add_argument("--bare-keys", choices=("fresh", "traced"), default="fresh",
                        help="the anchor's instance keys: fresh per call (TensorFlow's "
                        "default) or kept from tracing (the agent's)")
    parser.add_argument("--max-thread-growth", type=int, default=20)
    parser.add_argument("--max-rss-growth-kb", type=float, default=2048.0,
                        help="KiB per 1,000 log points and per 1,000 steps (the per-point leak "
                        "this guards against: ~5,700)")
    args = parser.parse_args()
    ok, growth = True, {}
    kinds = args.jobs.split(",")
    for kind in kinds:
        if kind not in ("mirrored", "multi", "bare"):
            parser.error(f"--jobs: unknown job {kind!r} (mirrored, multi, bare)")
    with tempfile.TemporaryDirectory(prefix="agent-soak-") as tmp:
        for kind in kinds:
            started = time.monotonic()
            first, last, code = (soak_bare(args, Path(tmp)) if kind == "bare"
                                 else soak(kind, args, Path(tmp)))
            ok = report(kind, first, last, code, args) and ok
            growth[kind] = statistics.median(kib_per_ksteps(first, last))
            print(f"{kind:8} took {time.monotonic() - started:.0f} s")
    if "multi" in growth and "bare" in growth:
        print(f"two workers, median RSS per 1,000 steps: distagent {growth['multi']:+.0f} KiB, "
              f"bare TensorFlow ({args.bare_keys} instance keys) {growth['bare']:+.0f} KiB")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
