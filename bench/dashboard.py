"""The dashboard's speed: first screen on a big logdir, CPU and memory while it watches.

1. Time to first screen: `distmon` in a real terminal (tmux) on 200 runs / 10 million points,
   until the runs panel is drawn, and until all 200 jobs are listed; against TensorBoard on the
   same logdir (127.0.0.1 only): until its HTTP API answers, and until it lists every run.
2. Watching: 8 tensorboardX writers add 10 points/s each for 60 s; distmon's CPU (% of one core)
   and RSS over that time (peak, and first vs last 10 s: flat memory); TensorBoard watching the
   same writers for 60 s as the anchor. Then the 200 runs of part 1 sitting idle, 60 s. Both at
   80x24 and 160x48. `--long 10`: RSS at minute 1 and minute 10 of watching the writers.
3. `--only sweep`: a sweep of `--sweep-runs` tiny runs (bench/sweep.py's, 2 tags x 10 steps,
   generated once into its cache): first row, all listed, CPU seconds until then, peak RSS,
   then idle: CPU and the failed stats a second (strace) while nothing is written.
Targets: first screen < 1 s; <= 5% of one core while watching; memory flat; on 100,000 runs
first row 1 s, all listed 10 s, 1.5 GB, idle 2% of a core.
The job index's own cost per refresh: bench/dashboard_index.py.
distmon runs as a user's install does, from byte-code caches (bench/_installed.py).

    python bench/dashboard.py [--repeats 3] [--runs 200] [--points 10000000] [--watch 60]
                              [--only first|watch|idle|sweep] [--long MINUTES] [--grid]
                              [--sweep-runs 100000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _installed as installed  # bench/ is not a package
from _logdir import ensure_logdir

WRITER = """
import math, sys, time
from tensorboardX import SummaryWriter
writer = SummaryWriter(sys.argv[1], flush_secs=1)
step, next_at = 0, time.monotonic()
while True:
    writer.add_scalar("loss", 2.0 * math.exp(-step / 500) + 0.1, step)
    step += 1
    next_at += 0.1
    time.sleep(max(0.0, next_at - time.monotonic()))
"""


# ---- distmon in a terminal ----


_SOCKETS = itertools.count()


class Terminal:
    """A tmux server of our own, one window running `command`."""

    def __init__(self, command: str, size: tuple[int, int] = (160, 48)) -> None:
        # A socket of its own each time: a server still exiting must not swallow the next one.
        self.base = ["tmux", "-L", f"distmon-bench-{os.getpid()}-{next(_SOCKETS)}"]
        self.began = time.perf_counter()
        x, y = str(size[0]), str(size[1])
        self._tmux("new-session", "-d", "-s", "bench", "-x", x, "-y", y, f"exec {command}")

    def _tmux(self, *args: str) -> str:
        return subprocess.run([*self.base, *args], capture_output=True, text=True).stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "bench")

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "bench", *keys)

    def pid(self) -> int:
        return int(self._tmux("display-message", "-p", "-t", "bench", "#{pane_pid}").strip())

    def wait_for(self, test: Callable[[str], bool], timeout: float = 120.0) -> float | None:
        """Seconds from start until `test(screen)`; None on timeout."""
        while time.perf_counter() - self.began < timeout:
            if test(self.screen()):
                return time.perf_counter() - self.began
            time.sleep(0.01)
        return None

    def close(self) -> None:
        self._tmux("kill-server")


def distmon_command(logdir: Path) -> str:
    return f"{installed.UNSET} {sys.executable} -m distmon --no-gpu {logdir}"


def first_screen(logdir: Path, jobs: int, timeout: float) -> dict[str, float | None]:
    term = Terminal(distmon_command(logdir))
    try:
        drawn = term.wait_for(lambda s: "╭─ runs" in s and "alerts" in s, timeout)
        listed = term.wait_for(lambda s: f"{jobs} jobs" in s and "reading" not in s, timeout)
        return {"first_screen_s": drawn, "all_listed_s": listed}
    finally:
        term.close()


# ---- TensorBoard ----


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as response:
        return json.loads(response.read())


def start_tensorboard(logdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "tensorboard.main",
        "--logdir",
        str(logdir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--reload_interval",
        "5",
    ]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, f"http://127.0.0.1:{port}"


def tensorboard_times(logdir: Path, runs: int, timeout: float) -> dict[str, float | None]:
    began = time.perf_counter()
    proc, url = start_tensorboard(logdir)
    answered = listed = None
    try:
        while time.perf_counter() - began < timeout and listed is None:
            try:
                found = _get_json(f"{url}/data/plugin/scalars/tags")
            except OSError:
                time.sleep(0.05)
                continue
            answered = answered or time.perf_counter() - began
            if len(found) >= runs:
                listed = time.perf_counter() - began
            else:
                time.sleep(0.1)
        return {"api_answers_s": answered, "all_listed_s": listed}
    finally:
        proc.terminate()
        proc.wait()


# ---- watching ----


def sample_process(pid: int, seconds: float) -> dict[str, float]:
    """CPU (% of one core) and RSS of `pid` and its children over `seconds`."""
    proc = psutil.Process(pid)
    procs = [proc, *proc.children(recursive=True)]
    cpu0 = sum(sum(p.cpu_times()[:2]) for p in procs)
    rss: list[float] = []
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        rss.append(sum(p.memory_info().rss for p in procs) / 2**20)
        time.sleep(1.0)
    cpu = sum(sum(p.cpu_times()[:2]) for p in procs) - cpu0
    tenth = max(1, len(rss) // 6)
    return {
        "cpu_percent": 100 * cpu / (time.perf_counter() - began),
        "peak_rss_mib": max(rss),
        "rss_first_10s_mib": statistics.fmean(rss[:tenth]),
        "rss_last_10s_mib": statistics.fmean(rss[-tenth:]),
    }


def with_writers(n: int, fn: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="distmon-watch-") as tmp:
        logdir = Path(tmp)
        writers = [
            subprocess.Popen([sys.executable, "-c", WRITER, str(logdir / f"run{i}")])
            for i in range(n)
        ]
        try:
            time.sleep(5)  # writers up, first points on disk
            return fn(logdir)
        finally:
            for w in writers:
                w.kill()
                w.wait()


def watch_terminal(
    logdir: Path, size: tuple[int, int], seconds: float, jobs: int, grid: bool = False
) -> dict[str, Any]:
    """distmon in tmux on `logdir`, sampled for `seconds` once all `jobs` are listed (with
    `grid`, once the chart grid of the focused job is shown)."""
    term = Terminal(distmon_command(logdir), size)
    try:
        term.wait_for(lambda s: f"{jobs} jobs" in s and "reading" not in s, 600.0)
        if grid:
            term.keys("v")
            if term.wait_for(lambda s: "outliers" in s, 600.0) is None:  # the grid's key bar
                raise SystemExit("the chart grid did not open")
        time.sleep(3)  # past start-up
        return sample_process(term.pid(), seconds)
    finally:
        term.close()


def watch_distmon(seconds: float, size: tuple[int, int], grid: bool = False) -> dict[str, Any]:
    return with_writers(8, lambda logdir: watch_terminal(logdir, size, seconds, 8, grid))


def rss_over_time(minutes: float) -> dict[str, Any]:
    """--long: RSS at minute 1 and at the end while 8 runs write (memory must stay flat)."""

    def run(logdir: Path) -> dict[str, Any]:
        term = Terminal(distmon_command(logdir), (160, 48))
        try:
            term.wait_for(lambda s: "8 jobs" in s)
            began, proc = time.perf_counter(), psutil.Process(term.pid())
            time.sleep(max(0.0, 60 - (time.perf_counter() - term.began)))
            at_1 = proc.memory_info().rss / 2**20
            time.sleep(max(0.0, minutes * 60 - (time.perf_counter() - began)))
            return {"rss_minute_1_mib": at_1, "rss_end_mib": proc.memory_info().rss / 2**20}
        finally:
            term.close()

    return with_writers(8, run)


def watch_tensorboard(seconds: float) -> dict[str, Any]:
    def run(logdir: Path) -> dict[str, Any]:
        proc, _ = start_tensorboard(logdir)
        try:
            time.sleep(8)  # started and loaded once
            return sample_process(proc.pid, seconds)
        finally:
            proc.terminate()
            proc.wait()

    return with_writers(8, run)


# ---- report ----


def median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if len(known) == len(values) and known else None


def fmt(value: float | None, unit: str = "s") -> str:
    return "timeout" if value is None else f"{value:.2f} {unit}"


def ratio(ours: float | None, theirs: float | None) -> str:
    return "-" if not ours or not theirs else f"{theirs / ours:.1f}x"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--watch", type=float, default=60.0, help="seconds of watching")
    parser.add_argument("--tb-timeout", type=float, default=300.0)
    parser.add_argument("--only", choices=("first", "watch", "idle", "long", "sweep"),
                        help="one part (sweep: only when asked)")
    parser.add_argument("--sweep-runs", type=int, default=100_000, help="--only sweep's runs")
    parser.add_argument("--grid", action="store_true",
                        help="watch and idle with the chart grid (v) shown")
    parser.add_argument(
        "--long", type=float, metavar="MINUTES", help="also RSS at minute 1 and MINUTES (10)"
    )
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux not installed: the dashboard bench needs a terminal; skipped")
        return 0
    has_tb = shutil.which("tensorboard") is not None or _importable("tensorboard")
    if args.only == "sweep":
        import sweep

        installed.warm_caches()
        root = sweep.ensure_sweep(sweep.DEFAULT_CACHE, args.sweep_runs, 2, 10)
        sweep.dashboard(root, args.sweep_runs, args.tb_timeout, args.watch)
        return 0
    logdir = ensure_logdir(args.runs, args.points)
    installed.warm_caches()
    jobs = args.runs // 2  # train/validation pairs

    if args.only in (None, "first"):
        first_part(args, logdir, jobs, has_tb)
    if args.only in (None, "watch"):
        watch_part(args, has_tb)
    if args.only in (None, "idle"):
        shown = ", the chart grid shown" if args.grid else ""
        print(f"== {args.runs} runs sitting idle{shown}, {args.watch:.0f} s")
        for size in ((80, 24), (160, 48)):
            idle = watch_terminal(logdir, size, args.watch, jobs, args.grid)
            print(f"distmon {size[0]}x{size[1]}  CPU {idle['cpu_percent']:.1f}% of a core   "
                  f"peak RSS {idle['peak_rss_mib']:.0f} MiB")  # fmt: skip
    if args.long or args.only == "long":
        args.long = args.long or 10.0
        rss = rss_over_time(args.long)
        print(f"== RSS while 8 runs write: minute 1 {rss['rss_minute_1_mib']:.0f} MiB, minute "
              f"{args.long:g} {rss['rss_end_mib']:.0f} MiB")  # fmt: skip
    return 0


def first_part(args: argparse.Namespace, logdir: Path, jobs: int, has_tb: bool) -> None:
    ours = [first_screen(logdir, jobs, args.tb_timeout) for _ in range(args.repeats)]
    for i, one in enumerate(ours):
        print(f"  distmon run {i + 1}: {one}", flush=True)
    drawn = median([r["first_screen_s"] for r in ours])
    listed = median([r["all_listed_s"] for r in ours])
    print(f"== first screen, {args.runs} runs / {args.points:,} points (median of {args.repeats})")
    print(f"distmon      first screen {fmt(drawn)}   all {jobs} jobs listed {fmt(listed)}")
    if has_tb:
        tb = tensorboard_times(logdir, args.runs, args.tb_timeout)
        print(
            f"tensorboard  API answers {fmt(tb['api_answers_s'])}   all runs listed "
            f"{fmt(tb['all_listed_s'])}   (ratio, listed: {ratio(listed, tb['all_listed_s'])})"
        )


def watch_part(args: argparse.Namespace, has_tb: bool) -> None:
    shown = ", the chart grid shown" if args.grid else ""
    print(f"== watching 8 runs x 10 points/s for {args.watch:.0f} s{shown}")
    cpu = {}
    for size in ((80, 24), (160, 48)):
        dm = watch_distmon(args.watch, size, args.grid)
        cpu[size] = dm["cpu_percent"]
        print(
            f"distmon {size[0]}x{size[1]}  CPU {dm['cpu_percent']:.1f}% of a core   peak RSS "
            f"{dm['peak_rss_mib']:.0f} MiB   RSS first/last 10 s "
            f"{dm['rss_first_10s_mib']:.0f}/{dm['rss_last_10s_mib']:.0f} MiB"
        )
    if has_tb:
        tbw = watch_tensorboard(args.watch)
        print(
            f"tensorboard     CPU {tbw['cpu_percent']:.1f}% of a core   peak RSS "
            f"{tbw['peak_rss_mib']:.0f} MiB   (CPU ratio at 80x24: "
            f"{ratio(cpu[(80, 24)], tbw['cpu_percent'])})"
        )


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    sys.exit(main())
