"""Hyperparameter sweeps: many small runs, against TensorBoard's Rust data server.

Generates two sweeps (10,000 runs x 2 tags x 1,000 steps, and 100,000 runs x 2 tags x 100 steps;
or the one --runs/--steps/--tags name), one small events file per run, its hparams in the TF
hparams plugin's session-start record, as Keras' hparams callback writes it; tensorboardX's
simple_value bytes), cached under --cache, and measures in one run, alternating A B A B:
  distmon_once  the whole `distmon --once --json --no-gpu SWEEP` process, spawn to exit, its
                peak RSS and CPU seconds (and it must report every point)
  rustboard     `tensorboard_data_server --reload once`, every point kept
                (`--samples-per-plugin=scalars=all`), spawn to its "Finished load cycle" line,
                its VmHWM and CPU seconds then. It must have loaded every run (every tag, to
                its last step: asked over its gRPC API after the timing), or no ratio is
                printed: at its open-file limit it skips runs and still finishes its cycle.
                A sweep of more than PART_RUNS runs is written in folders of PART_RUNS runs
                (part-0/...), which the data server reads one process each, one after the
                other: its time and CPU seconds are those of all the parts, its RSS the
                largest part's (one process over 100,000 runs hits the open-file limit).
Each figure is the median of --repeats rounds (with min-max); ratios are distmon / rustboard.
CPU seconds are the fairer figure on a shared, loaded machine (wall time there is mostly
waiting for a core). Targets: time and memory at most the data server's.

With --dashboard, also the dashboard in tmux on the same sweep: seconds to its first job row
and to all jobs listed (targets 1 s and 10 s), the CPU seconds it took to list them (all
threads, and the UI thread's share: on a loaded machine the wall times mostly say how loaded
it is), then its CPU and RSS while the sweep sits idle.

Run: python bench/sweep.py [--runs N] [--steps N] [--tags 2] [--repeats 3]
                           [--cache DIR] [--generate-only] [--dashboard [--skip-once]]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _installed as installed
import ingest  # bench/ is not a package: its helpers drive the same loaders

DEFAULT_CACHE = Path(os.environ.get("DISTMON_BENCH_CACHE", "/tmp/distmon-bench-sweep"))
TAG_NAMES = ("loss", "accuracy", "val_loss", "val_accuracy", "learning_rate")
SWEEPS = ((10_000, 1_000), (100_000, 100))  # (runs, steps) measured by default
PART_RUNS = 12_500  # runs per folder of a larger sweep: one data server process reads each


def _record(data: bytes) -> bytes:
    from distcore.tfrecord.framing import record

    return record(data)


def _hparams_event(lr: float, batch: int, optimizer: str) -> bytes:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.hparams import plugin_data_pb2

    data = plugin_data_pb2.HParamsPluginData(version=0)
    hp = data.session_start_info.hparams
    hp["lr"].number_value = lr
    hp["batch_size"].number_value = batch
    hp["optimizer"].string_value = optimizer
    meta = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name="hparams", content=data.SerializeToString()
        )
    )
    value = summary_pb2.Summary.Value(tag="_hparams_/session_start_info", metadata=meta)
    value.tensor.dtype = 7  # DT_STRING, empty, as the hparams API writes it
    summary = summary_pb2.Summary(value=[value])
    return event_pb2.Event(wall_time=1.7e9, step=0, summary=summary).SerializeToString()


def _run_bytes(run: int, tags: int, steps: int) -> bytes:
    from tensorboard.compat.proto import event_pb2, summary_pb2

    lr = 10 ** -(1 + run % 4) * (1 + run % 7)
    out = [
        _record(event_pb2.Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString()),
        _record(_hparams_event(lr, 32 << (run % 3), ("adam", "sgd")[run % 2])),
    ]
    template = []
    for tag in range(tags):
        value = summary_pb2.Summary.Value(tag=TAG_NAMES[tag % len(TAG_NAMES)], simple_value=0.0)
        template.append(summary_pb2.Summary(value=[value]))
    for step in range(steps):
        for tag, summary in enumerate(template):
            summary.value[0].simple_value = math.exp(-step * lr / 50) + 0.01 * tag + run * 1e-6
            event = event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary)
            out.append(_record(event.SerializeToString()))
    return b"".join(out)


def run_dir(root: Path, runs: int, run: int) -> Path:
    """Where a sweep's run is: in root, or in its part's folder when there are more than
    PART_RUNS."""
    name = f"lr-sweep-{run:05d}"
    return root / name if runs <= PART_RUNS else root / f"part-{run // PART_RUNS}" / name


def parts(root: Path, runs: int) -> list[Path]:
    """The folders one data server process reads each."""
    if runs <= PART_RUNS:
        return [root]
    return [root / f"part-{k}" for k in range(math.ceil(runs / PART_RUNS))]


def generate(root: Path, runs: int, tags: int, steps: int) -> None:
    for run in range(runs):
        directory = run_dir(root, runs, run)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"events.out.tfevents.{1_700_000_000 + run}.sweep"
        path.write_bytes(_run_bytes(run, tags, steps))


def ensure_sweep(cache: Path, runs: int, tags: int, steps: int) -> Path:
    root = cache / f"sweep-{runs}x{tags}x{steps}"
    if (root / ".complete").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    print(f"generating {root} ...", flush=True)
    start = time.perf_counter()
    generate(root, runs, tags, steps)
    (root / ".complete").write_text("ok\n")
    print(f"  done in {time.perf_counter() - start:.0f} s", flush=True)
    return root


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a live process, from /proc (clock ticks)."""
    return _cpu_seconds_of(Path(f"/proc/{pid}/stat"))


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a live process ("process": every thread, ended ones too) and of its
    main thread ("ui": Textual's), from /proc."""
    main = Path(f"/proc/{pid}/task/{pid}/stat")
    return {"process": _cpu_seconds(pid), "ui": _cpu_seconds_of(main)}


def _cpu_seconds_of(stat: Path) -> float:
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_rustboard(root: Path, runs: int, tags: int, steps: int) -> dict[str, Any] | None:
    """The data server, every point kept, over each part of the sweep in turn: spawn to its
    "Finished load cycle" line (its whole process, as for distmon), its VmHWM and its CPU
    seconds then; after the timing, how many runs it holds whole. Summed over the parts (RSS:
    the largest part's)."""
    try:
        from tensorboard_data_server import server_binary  # type: ignore[import-untyped]
    except ImportError:
        return None
    binary = server_binary()
    if not binary or not os.path.exists(binary):
        return None
    total = {"seconds": 0.0, "cpu": 0.0, "rss_mib": 0.0, "loaded": 0}
    for part in parts(root, runs):
        one = _rustboard_part(binary, part, tags, steps)
        if one is None:
            return None
        for key in ("seconds", "cpu", "loaded"):
            total[key] += one[key]
        total["rss_mib"] = max(total["rss_mib"], one["rss_mib"])
    return total


def _rustboard_part(binary: str, root: Path, tags: int, steps: int) -> dict[str, Any] | None:
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        start = time.perf_counter()
        proc = subprocess.Popen(
            [binary, "--logdir", str(root), "--reload", "once", "--port", "0", "-v",
             "--port-file", str(port_file), "--samples-per-plugin=scalars=all"],
            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert proc.stderr is not None
        seconds = None
        try:
            for line in proc.stderr:
                if ingest.LOAD_CYCLE.search(line):
                    seconds = time.perf_counter() - start
                    break
            cpu, rss_kib = _cpu_seconds(proc.pid), ingest._vm_hwm_kib(proc.pid)
            loaded = None
            if seconds is not None:
                loaded = _runs_loaded(int(port_file.read_text()), tags, steps)
        finally:
            proc.kill()
            proc.wait()
    if seconds is None or loaded is None:
        return None
    return {"seconds": seconds, "cpu": cpu, "rss_mib": rss_kib / 1024, "loaded": loaded}


def _runs_loaded(port: int, tags: int, steps: int) -> int | None:
    """Runs the data server holds with every tag to the last step (its gRPC API's
    ListScalars); None without grpc."""
    try:
        import grpc  # type: ignore[import-untyped]
        from tensorboard.data.proto import data_provider_pb2, data_provider_pb2_grpc
    except ImportError:
        return None
    big = 1 << 30
    options = [("grpc.max_receive_message_length", big)]
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        stub = data_provider_pb2_grpc.TensorBoardDataProviderStub(channel)
        request = data_provider_pb2.ListScalarsRequest(
            plugin_filter=data_provider_pb2.PluginFilter(plugin_name="scalars"))
        response = stub.ListScalars(request, timeout=600)
    return sum(
        1 for run in response.runs
        if len(run.tags) == tags and all(t.metadata.max_step == steps - 1 for t in run.tags)
    )


def run_distmon_once(root: Path) -> dict[str, Any]:
    """`distmon --once --json --no-gpu`: spawn to exit, its peak RSS and CPU seconds; the
    points it reports are counted (every one must be there)."""
    distmon = shutil.which("distmon", path=str(Path(sys.executable).parent)) or "distmon"
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen([distmon, "--once", "--json", "--no-gpu", str(root)], stdout=out,
                                env=installed.user_env())
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        out.seek(0)
        data = out.read()
    if os.waitstatus_to_exitcode(status) != 0 or not data:
        raise SystemExit(f"distmon --once failed: exit {os.waitstatus_to_exitcode(status)}")
    report = json.loads(data)
    points = sum(s["count"] for run in report["runs"] for s in run["scalars"].values())
    return {"seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime, "points": points,
            "rss_mib": usage.ru_maxrss / 1024}


def _ratio(mine: float, theirs: float) -> float:
    return mine / theirs if theirs > 0 else math.nan


def _row(name: str, results: list[dict[str, Any]], anchor: dict[str, float] | None) -> str:
    seconds = [r["seconds"] for r in results]
    median_s = statistics.median(seconds)
    median_rss = statistics.median(r["rss_mib"] for r in results)
    median_cpu = statistics.median(r["cpu"] for r in results)
    ratios = ""
    if anchor:
        ratios = "".join(f"{_ratio(mine, anchor[key]):>9.2f}x" for mine, key in (
            (median_s, "seconds"), (median_cpu, "cpu"), (median_rss, "rss_mib")))
    spread = f"({min(seconds):.2f}-{max(seconds):.2f}, {len(seconds)})"
    return f"{name:<14}{median_s:>9.2f}{spread:>20}{median_cpu:>8.2f}{median_rss:>9.0f} MB{ratios}"


def bench(root: Path, runs: int, tags: int, steps: int, repeats: int) -> None:
    expected = runs * tags * steps
    size_mb = ingest.logdir_bytes(root) / 1e6
    print(f"\n== {root} ({runs:,} runs, {expected:,} points, {size_mb:.0f} MB); alternating "
          f"rounds, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    results: dict[str, list[dict[str, Any]]] = {"rustboard": [], "distmon_once": []}
    short = None  # a round where the data server did not hold every run
    for _ in range(repeats):
        rust = run_rustboard(root, runs, tags, steps)
        if rust is not None:
            results["rustboard"].append(rust)
            if rust["loaded"] != runs:
                short = rust["loaded"]
        once = run_distmon_once(root)
        if once["points"] != expected:
            raise SystemExit(f"distmon --once read {once['points']:,} points, not {expected:,}")
        results["distmon_once"].append(once)
    anchor = None
    if results["rustboard"] and short is None:
        anchor = {key: statistics.median(r[key] for r in results["rustboard"])
                  for key in ("seconds", "cpu", "rss_mib")}
    print(f"{'loader':<14}{'median s':>9}{'(min-max, n)':>20}{'CPU s':>8}{'peak RSS':>12}"
          f"{'time/rust':>10}{'CPU/rust':>10}{'RSS/rust':>10}")
    if results["rustboard"]:
        print(_row("rustboard", results["rustboard"], None)
              + (f"  ({len(parts(root, runs))} parts)" if runs > PART_RUNS else ""))
    else:
        print("rustboard     unavailable (pip install tensorboard-data-server grpcio)")
    if short is not None:
        print(f"rustboard     held {short:,} of {runs:,} runs whole: no ratio")
    print(_row("distmon_once", results["distmon_once"], anchor), flush=True)
    if anchor is not None:  # the ratio the targets are read from: rust / distmon CPU
        cpu = statistics.median(r["cpu"] for r in results["distmon_once"])
        print(f"   rustboard CPU / distmon CPU: {_ratio(anchor['cpu'], cpu):.2f} (target >= 1.0)")


def failed_stats(pid: int, seconds: float) -> float | None:
    """Failed `stat`-like calls a second of the process (every thread), by strace attached for
    `seconds`; None where strace is missing or may not attach."""
    if shutil.which("strace") is None:
        return None
    calls = "trace=stat,lstat,newfstatat,statx,fstatat64"
    proc = subprocess.Popen(["strace", "-f", "-c", "-qq", "-e", calls, "-p", str(pid)],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    time.sleep(seconds)
    proc.send_signal(2)  # SIGINT: strace detaches and prints its table
    _, table = proc.communicate(timeout=30)
    total = [line.split() for line in table.splitlines() if line.rstrip().endswith("total")]
    if not total:
        return None
    numbers = [f for f in total[-1][:-1] if f.replace(".", "").isdigit()]
    return int(numbers[-1]) / seconds if len(numbers) >= 5 else 0.0  # its errors column


def dashboard(root: Path, jobs: int, timeout: float, idle: float) -> None:
    """The dashboard in a terminal (tmux, 160x48; bench/dashboard.py's harness) on the sweep:
    seconds to its first job row and to all jobs listed, then its RSS and CPU while the sweep
    sits idle (no writer), its failed stats a second then (strace, 10 s) and its peak RSS."""
    import dashboard as dash  # bench/dashboard.py

    if shutil.which("tmux") is None:
        print("dashboard: tmux not installed (apt-get install tmux)")
        return
    term = dash.Terminal(dash.distmon_command(root))
    try:
        first = term.wait_for(lambda s: "lr-sweep-" in s, timeout)
        first_cpu = thread_cpu(term.pid()) if first is not None else None
        listed = term.wait_for(lambda s: f"{jobs} jobs" in s and "reading" not in s, timeout)
        threads = thread_cpu(term.pid())
        sample = dash.sample_process(term.pid(), idle) if listed is not None else None
        failing = failed_stats(term.pid(), 10.0) if listed is not None else None
        peak = ingest._vm_hwm_kib(term.pid()) / 1024
    finally:
        term.close()
    print(f"\n== dashboard on {jobs:,} jobs: first row {dash.fmt(first)}, all listed "
          f"{dash.fmt(listed)} (targets 1 s, 10 s); load average {os.getloadavg()[0]:.1f}")
    if first_cpu:  # the first row's wall time is mostly the machine's load
        print(f"   CPU s until the first row: {first_cpu['process']:.2f} in all, UI thread "
              f"{first_cpu['ui']:.2f}")
    if threads:  # CPU, not wall time, is what a loaded machine does not distort
        print(f"   CPU s until listed: {threads['process']:.1f} in all, UI thread "
              f"{threads['ui']:.1f}, readers, index and the rest "
              f"{threads['process'] - threads['ui']:.1f}")
    if sample is not None:
        print(f"   idle {idle:.0f} s: {sample['cpu_percent']:.1f}% of a core (target 2%), "
              f"failed stats {'?' if failing is None else f'{failing:.0f}'}/s; peak RSS "
              f"{peak:.0f} MiB (target 1.5 GB)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, help="runs in the sweep (default: both sweeps)")
    parser.add_argument("--tags", type=int, default=2, help="scalar tags per run")
    parser.add_argument("--steps", type=int, help="steps per tag (default: both sweeps)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--generate-only", action="store_true", help="only build the sweep")
    parser.add_argument("--dashboard", action="store_true",
                        help="also time the dashboard on it (tmux): first row, all listed, idle")
    parser.add_argument("--dashboard-timeout", type=float, default=300.0)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle sampling")
    parser.add_argument("--skip-once", action="store_true", help="skip the --once comparison")
    args = parser.parse_args()
    for name in ("runs", "tags", "steps", "repeats"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    sweeps: tuple[tuple[int, int], ...] = SWEEPS
    if args.runs is not None or args.steps is not None:
        sweeps = ((args.runs or SWEEPS[0][0], args.steps or SWEEPS[0][1]),)
    roots = [(ensure_sweep(args.cache, runs, args.tags, steps), runs, steps)
             for runs, steps in sweeps]
    if args.generate_only:
        return 0
    installed.warm_caches()
    for root, runs, steps in roots:
        if not args.skip_once:
            bench(root, runs, args.tags, steps, args.repeats)
        if args.dashboard:
            dashboard(root, runs, args.dashboard_timeout, args.idle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
