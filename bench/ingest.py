"""Ingest speed and memory on one logdir of 8 runs x 10 tags x 20,000 steps (1.6M scalar events),
written once by tf.summary (TF2 tensors) and once by tensorboardX (simple_value), and on 10M
points (the same bytes as tensorboardX, built directly); cached under --cache.

Loaders, each in a fresh process (its own peak RSS, nothing cached in Python):
  distcore         load_once() in process, imports excluded
  distmon_once     the whole `distmon --once --json LOGDIR` process, start to exit
  rustboard        TensorBoard's Rust data server (`--load_fast`), every point kept
                   (`--samples-per-plugin=scalars=all`, the same work as the others), timed by
                   its own "Finished load cycle (...)" line (start-up is ~10 ms)
  event_accumulator, tbparse   the Python readers (slow: --slow-repeats times only)
Rounds alternate the loaders (A B C A B C ...), so machine load hits them alike; each figure
is the median of --repeats rounds, with its spread, and each loader's ratio to rustboard.
distmon_once runs as a user's install does, from byte-code caches (bench/_installed.py).

Run: .venv/bin/python bench/ingest.py [--quick] [--repeats 3] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _installed as installed  # bench/ is not a package

DEFAULT_CACHE = Path(os.environ.get("DISTMON_BENCH_CACHE", "/tmp/distmon-bench-ingest"))
LOADERS = ("rustboard", "distcore", "distmon_once", "event_accumulator", "tbparse")
SLOW = frozenset({"event_accumulator", "tbparse"})
FLAVOURS = ("tf2", "tensorboardx")


def value_at(tag: int, step: int) -> float:
    return math.exp(-step / 5000.0) * (1.0 + 0.1 * math.sin(step / 37.0 + tag)) + 0.01 * tag


# ---- generating the logdirs (each in a subprocess, cached) ----


def generate_tf2(root: Path, runs: int, tags: int, steps: int) -> None:
    import tensorflow as tf

    def write(n: tf.Tensor) -> None:
        for i in tf.range(n):
            step = tf.cast(i, tf.int64)
            x = tf.cast(i, tf.float32)
            for tag in range(tags):
                value = tf.exp(-x / 5000.0) * (1.0 + 0.1 * tf.sin(x / 37.0 + tag)) + 0.01 * tag
                tf.summary.scalar(f"metric/{tag}", value, step=step)

    for run in range(runs):
        writer = tf.summary.create_file_writer(str(root / f"run{run}"), max_queue=10_000)
        with writer.as_default():
            # Traced per run: a traced function keeps the writer it was traced with.
            tf.function(write)(tf.constant(steps))
        writer.close()


def generate_tensorboardx(root: Path, runs: int, tags: int, steps: int) -> None:
    from tensorboardX import SummaryWriter

    for run in range(runs):
        writer = SummaryWriter(str(root / f"run{run}"), max_queue=10_000, flush_secs=3600)
        for step in range(steps):
            for tag in range(tags):
                writer.add_scalar(f"metric/{tag}", value_at(tag, step), step)
        writer.close()


def generate_synthetic(root: Path, runs: int, tags: int, steps: int) -> None:
    """The bytes tensorboardX writes, built directly (fast enough for 10M points)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    from distcore.tfrecord.framing import record

    for run in range(runs):
        (root / f"run{run}").mkdir(parents=True, exist_ok=True)
        path = root / f"run{run}" / f"events.out.tfevents.{1_700_000_000 + run}.bench"
        with path.open("wb") as f:
            for step in range(steps):
                chunk = []
                for tag in range(tags):
                    summary = summary_pb2.Summary(
                        value=[summary_pb2.Summary.Value(
                            tag=f"metric/{tag}", simple_value=value_at(tag, step))]
                    )
                    chunk.append(record(event_pb2.Event(
                        wall_time=1.7e9 + step, step=step, summary=summary
                    ).SerializeToString()))
                f.write(b"".join(chunk))


GENERATORS = {"tf2": generate_tf2, "tensorboardx": generate_tensorboardx,
              "synthetic": generate_synthetic}


def ensure_logdir(cache: Path, flavour: str, runs: int, tags: int, steps: int) -> Path:
    root = cache / f"{flavour}-{runs}x{tags}x{steps}"
    if (root / ".complete").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    print(f"generating {root} ...", flush=True)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, __file__, "--generate", flavour, str(root), str(runs), str(tags),
         str(steps)], check=True,
    )
    (root / ".complete").write_text("ok\n")
    print(f"  done in {time.perf_counter() - start:.0f} s", flush=True)
    return root


# ---- the loaders (each runs in its own subprocess and prints one JSON line) ----


def load_distcore(root: Path) -> int:
    from distcore.events import load_once

    return sum(s.count for run in load_once([root]) for s in run.scalars.values())


def load_event_accumulator(root: Path) -> int:
    # With TensorFlow importable, TensorBoard reads records with TF's C++ reader.
    import tensorflow  # noqa: F401
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.backend.event_processing import event_multiplexer as em

    mux = em.EventMultiplexer(size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    mux.AddRunsFromDirectory(str(root))
    mux.Reload()
    total = 0
    for run, tags in mux.Runs().items():
        acc = mux.GetAccumulator(run)
        total += sum(len(acc.Scalars(t)) for t in tags["scalars"])
        total += sum(len(acc.Tensors(t)) for t in tags["tensors"])
    return total


def load_tbparse(root: Path) -> int:
    from tbparse import SummaryReader

    reader = SummaryReader(str(root), pivot=False, event_types={"scalars", "tensors"})
    return len(reader.scalars) + len(reader.tensors)


IN_PROCESS = {"distcore": load_distcore, "event_accumulator": load_event_accumulator,
              "tbparse": load_tbparse}


def run_loader(name: str, root: Path) -> dict[str, Any]:
    """Time one load in this process (imports excluded), report peak RSS."""
    if name == "event_accumulator":
        import tensorflow  # noqa: F401  (import cost is not load cost)
    if name == "tbparse":
        import tbparse  # noqa: F401
    start = time.perf_counter()
    events = IN_PROCESS[name](root)
    seconds = time.perf_counter() - start
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "events": events, "rss_mib": rss_mib}


def run_in_subprocess(name: str, root: Path) -> dict[str, Any] | None:
    out = subprocess.run(
        [sys.executable, __file__, "--load", name, str(root)],
        capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    if out.returncode != 0:
        print(f"  {name} failed: {out.stderr.strip().splitlines()[-1:]}", flush=True)
        return None
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run_distmon_once(root: Path, *flags: str) -> dict[str, Any] | None:
    """The whole `distmon --once --json` process: spawn to exit, and its own peak RSS."""
    distmon = shutil.which("distmon", path=str(Path(sys.executable).parent)) or "distmon"
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen([distmon, "--once", "--json", *flags, str(root)], stdout=out,
                                env=installed.user_env())
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        data = out.read()
    if proc.returncode != 0 or not data:
        print(f"  distmon --once failed: exit {proc.returncode}", flush=True)
        return None
    report = json.loads(data)
    events = sum(s["count"] for run in report["runs"] for s in run["scalars"].values())
    return {"seconds": seconds, "events": events, "rss_mib": usage.ru_maxrss / 1024}


def run_rustboard(root: Path) -> dict[str, Any] | None:
    """`tensorboard_data_server --reload once`, every point kept: its own load-cycle time."""
    try:
        from tensorboard_data_server import server_binary  # type: ignore[import-untyped]

        binary = server_binary()
    except (ImportError, RuntimeError):
        return None
    if not binary or not os.path.exists(binary):
        return None
    proc = subprocess.Popen(
        [binary, "--logdir", str(root), "--reload", "once", "--port", "0", "-v",
         "--samples-per-plugin=scalars=all"],
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )
    seconds = None
    assert proc.stderr is not None
    for line in proc.stderr:
        match = LOAD_CYCLE.search(line)
        if match:
            value, unit = float(match.group(1)), match.group(2)
            seconds = value / {"s": 1, "ms": 1e3, "µs": 1e6, "us": 1e6}[unit]
            break
    rss_kib = _vm_hwm_kib(proc.pid)
    proc.kill()
    proc.wait()
    if seconds is None:
        return None
    return {"seconds": seconds, "events": None, "rss_mib": rss_kib / 1024}


LOAD_CYCLE = re.compile(r"Finished load cycle \(([0-9.]+)(s|ms|µs|us)\)")


def _vm_hwm_kib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1])
    except OSError:
        pass
    return float("nan")


def measure(name: str, root: Path) -> dict[str, Any] | None:
    if name == "rustboard":
        return run_rustboard(root)
    if name == "distmon_once":
        return run_distmon_once(root)
    return run_in_subprocess(name, root)


def alternating(
    loaders: list[str], root: Path, repeats: int, slow_repeats: int
) -> dict[str, dict[str, Any] | None]:
    """Rounds of every loader in turn; the Python readers only in the first `slow_repeats`."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in loaders}
    failed: set[str] = set()
    for round_ in range(repeats):
        for name in loaders:
            if name in failed or (name in SLOW and round_ >= slow_repeats):
                continue
            result = measure(name, root)
            if result is None:
                failed.add(name)
            else:
                runs[name].append(result)
    return {name: _summary(results) if results else None for name, results in runs.items()}


def _summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [r["seconds"] for r in results]
    return {
        "seconds": statistics.median(seconds), "low": min(seconds), "high": max(seconds),
        "n": len(seconds), "rss_mib": statistics.median(r["rss_mib"] for r in results),
        "events": results[0]["events"],
    }


def decoder_path() -> str:
    """Which decoder distcore runs here: the C kernel, or the reference (DISTMON_PURE=1, or not
    built)."""
    from distcore.tfrecord import kernel

    return kernel.describe()


def logdir_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*tfevents*"))


def bench_logdir(
    title: str, root: Path, expected: int, loaders: list[str], repeats: int, slow: int
) -> None:
    size_mb = logdir_bytes(root) / 1e6
    load = os.getloadavg()[0]
    print(f"\n== {title}: {root} ({expected:,} events, {size_mb:.0f} MB); alternating rounds, "
          f"load average {load:.1f} on {os.cpu_count()} cores; decoder: {decoder_path()}",
          flush=True)
    results = alternating(loaders, root, repeats, slow)
    print(f"{'loader':<19}{'median s':>9}{'(min-max, n)':>18}{'events/s':>12}{'peak RSS':>10}"
          f"{'time / rustboard':>18}")
    rust = results.get("rustboard")
    for name, r in results.items():
        if r is None:
            print(f"{name:<19}{'unavailable':>9}")
            continue
        ratio = f"{r['seconds'] / rust['seconds']:.2f}x" if rust else "-"
        note = "" if r["events"] in (None, expected) else f"  (read {r['events']:,} events!)"
        spread = f"({r['low']:.2f}-{r['high']:.2f}, {r['n']})"
        print(f"{name:<19}{r['seconds']:>9.2f}{spread:>18}{expected / r['seconds']:>12,.0f}"
              f"{r['rss_mib']:>7.0f} MB{ratio:>18}{note}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1/10 of the steps (160k events)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds")
    parser.add_argument("--slow-repeats", type=int, default=1,
                        help="rounds for event_accumulator and tbparse (minutes each)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--loaders", default=",".join(LOADERS))
    parser.add_argument("--flavours", default=",".join(FLAVOURS))
    parser.add_argument("--skip-10m", action="store_true", help="skip the 10M-point logdir")
    parser.add_argument("--generate-only", action="store_true", help="only build the logdirs")
    parser.add_argument("--generate", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--load", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        flavour, root, runs, tags, steps = args.generate
        GENERATORS[flavour](Path(root), int(runs), int(tags), int(steps))
        return 0
    if args.load:
        print(json.dumps(run_loader(args.load[0], Path(args.load[1]))))
        return 0
    runs, tags, steps = 8, 10, 2_000 if args.quick else 20_000
    big_steps = 12_500 if args.quick else 125_000  # 8 runs x 10 tags: 1M or 10M points
    if args.generate_only:
        for flavour in args.flavours.split(","):
            ensure_logdir(args.cache, flavour, runs, tags, steps)
        ensure_logdir(args.cache, "synthetic", runs, tags, big_steps)
        return 0
    loaders = args.loaders.split(",")
    installed.warm_caches()
    for flavour in args.flavours.split(","):
        root = ensure_logdir(args.cache, flavour, runs, tags, steps)
        bench_logdir(flavour, root, runs * tags * steps, loaders, args.repeats, args.slow_repeats)
    if not args.skip_10m:
        big = ensure_logdir(args.cache, "synthetic", runs, tags, big_steps)
        fast = [name for name in loaders if name not in SLOW]
        bench_logdir(f"{runs * tags * big_steps:,} points (tensorboardX bytes)", big,
                     runs * tags * big_steps, fast, args.repeats, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
