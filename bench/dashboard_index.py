"""The job index's cost per refresh: 200 runs x 2,000 points, with the alert rules.

The dashboard refreshes once a second. Before the job index, every refresh ran every alert rule
over every run on the UI thread, smoothing whole series (88-223 ms here at this size). Measured:
- the index's refresh when nothing changed (the common tick: run.json stats and clock rules);
- its refresh after 8 of the 200 runs got a new point (only those jobs' point rules run again);
- a cold refresh (a new index: every job's facts from scratch, as `--once` does once);
- the old path beside it, in the same run: the previous rules over every run (whole-series
  smoothing), as the dashboard ran them at every refresh.
While 8 runs write, every refresh (1 s) has changes: that is the amortized cost. Target < 5 ms.

    python bench/dashboard_index.py [--runs 200] [--points 2000] [--repeats 30]
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _logdir import CACHE, TAGS, generate, scalar_event

from distcore.alerts import Alert
from distcore.alerts.cadence import run_stalled
from distcore.alerts.gpus import input_bound_suspected
from distcore.alerts.series import RISING_WINDOW, input_stall, loss_nan
from distcore.events import LogdirWatcher, RunStore
from distcore.jobs.index import JobIndex
from distcore.smoothing import debiased_ema
from distcore.tags import pick_tag


def logdir(runs: int, steps: int) -> Path:
    root = CACHE / f"index-{runs}runs-{steps}steps"
    if not (root / ".complete").exists():
        print(f"generating {root} ...", flush=True)
        generate(root, runs, steps)
        (root / ".complete").write_text("ok\n")
    return root


def old_loss_rising(run: Any) -> Alert | None:
    """The rule as it was before the index: whole-series finiteness check and smoothing."""
    tag = pick_tag(run.scalars, "loss")
    if tag is None:
        return None
    series = run.scalars[tag]
    if len(series.values) < RISING_WINDOW or not all(map(math.isfinite, series.values)):
        return None
    window = debiased_ema(series.values)[-RISING_WINDOW :]
    low = min(window)
    ups = sum(b > a for a, b in itertools.pairwise(window))
    if window[-1] - low <= 0.1 * max(abs(low), 1e-12) or ups < 0.7 * (len(window) - 1):
        return None
    return Alert("loss_rising", "warning", run.name, "rising", low)


def old_path(store: RunStore) -> None:
    """Every rule over every run, as each dashboard refresh did."""
    now = time.time()
    runs = store.snapshot()
    for run in runs:
        input_stall(run), loss_nan(run), old_loss_rising(run)
        run_stalled(run, now)
    input_bound_suspected(runs, [], now)


def append_points(root: Path, runs: int, step: int) -> None:
    """One new point per tag in the first `runs` runs (as 8 live writers would add)."""
    from distcore.tfrecord.framing import record

    for path in sorted(root.rglob("*tfevents*"))[:runs]:
        chunk = b"".join(record(scalar_event(t.encode(), 0.1, step, time.time())) for t in TAGS)
        with open(path, "ab") as f:
            f.write(chunk)


def timed(fn: Any) -> float:
    began = time.perf_counter()
    fn()
    return (time.perf_counter() - began) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--points", type=int, default=2000, help="points per series")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    source = logdir(args.runs, args.points)
    with __import__("tempfile").TemporaryDirectory(prefix="distmon-index-") as tmp:
        root = Path(tmp) / "logs"
        __import__("shutil").copytree(source, root)
        store = RunStore(max_points=args.points)
        watcher = LogdirWatcher([root], store)
        watcher.scan_once()
        index = JobIndex(store, logdirs=[str(root)])
        cold = [timed(lambda: JobIndex(store, logdirs=[str(root)]).refresh()) for _ in range(3)]
        index.refresh()
        idle, changed, copies, frees, old = [], [], [], [], []
        for k in range(args.repeats):  # alternating, so that load on the machine hits all three
            idle.append(timed(index.refresh))
            append_points(root, 8, args.points + k)
            watcher.scan_once()
            copies.append(timed(store.snapshot))  # the reader's copy of the 8 changed runs
            replaced = [index.latest()]  # freed below, timed apart: the reader's float tuples
            changed.append(timed(index.refresh))  # the index's own work on top of it
            frees.append(timed(replaced.clear))
            old.append(timed(lambda: old_path(store)))
    med = {name: statistics.median(v) for name, v in
           (("idle", idle), ("changed", changed), ("old", old), ("cold", cold),
            ("copies", copies), ("frees", frees))}  # fmt: skip
    total = med["changed"] + med["copies"] + med["frees"]
    print(f"== job index, {args.runs} runs x {args.points:,} points x {len(TAGS)} tags "
          f"(medians of {args.repeats})")  # fmt: skip
    print(f"refresh, nothing changed          {med['idle']:7.2f} ms")
    print(f"refresh, 8 runs changed           {med['changed']:7.2f} ms   the index and its alerts "
          "(target < 5 ms)")  # fmt: skip
    print(f"  + the reader's copy of 8 runs   {med['copies']:7.2f} ms")
    print(f"  + freeing the snapshots replaced{med['frees']:7.2f} ms")
    print(f"  = per refresh while 8 runs write{total:7.2f} ms   (every refresh has changes)")
    print(f"cold (every job's facts, --once)  {med['cold']:7.2f} ms")
    print(f"old path (every rule, every run)  {med['old']:7.2f} ms   "
          f"{med['old'] / total:.0f}x the whole refresh above")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
