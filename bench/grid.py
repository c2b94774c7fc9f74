"""The chart grid's cost per refresh (the dashboard's `v` screen, and `--once --plot`).

Two jobs, as the job index hands them to the dashboard (the store's own series and columns):
- a 10,000-run sweep (200 points a run, loss and accuracy), its one focused job charted: the
  jobs the grid charts are picked out of the sweep, then the page drawn;
- a job with 200 tags, train and validation, 2,000 points a series (the store's bound).
Each refresh after a new point (the job's version changed: every shown curve is smoothed and
drawn again, the grid's worst case) draws a page at 160x48 and 240x60, in colour and without,
then renders it as a terminal would (Rich segments). Target: <= 100 ms a refresh.

    python bench/grid.py [--repeats 10] [--sweep 10000] [--tags 200]
"""

from __future__ import annotations

import argparse
import io
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "shared"), str(ROOT / "tui")]

from rich.console import Console  # noqa: E402

from distcore.events.series import SeriesBuffer  # noqa: E402
from distcore.events.snapshots import RunSnapshot  # noqa: E402
from distcore.jobs.snapshots import Job  # noqa: E402
from distcore.location import RunLocation  # noqa: E402
from distmon import view as views  # noqa: E402
from distmon.render.grid_model import GridMemory  # noqa: E402
from distmon.render.grid_page import draw_page  # noqa: E402
from distmon.render.grid_state import GridState  # noqa: E402

SIZES = ((160, 48), (240, 60))
TARGET_MS = 100.0


def series(tag: str, points: int, seed: int) -> Any:
    import numpy as np

    buffer = SeriesBuffer(tag, max(points, 2))
    steps = np.arange(points, dtype=np.int64) * 10
    values: Any = 2.0 * np.exp(-steps / (points * 3.0)) + 0.05 * np.sin(steps * 0.37 + seed)
    walls: Any = 1.7e9 + steps * 0.1
    buffer.extend(steps, walls, values)
    return buffer.snapshot()


def run(name: str, tags: Sequence[str], points: int, seed: int) -> RunSnapshot:
    scalars = {t: series(t, points, seed + i) for i, t in enumerate(tags)}
    return RunSnapshot(name=name, path=RunLocation.on_this_machine(Path("/logs") / name),
                       status="live", files=1, problems=(), hparams={}, scalars=scalars,
                       last_update=1.7e9, last_modified=1.7e9)


def job(name: str, tags: Sequence[str], points: int, version: int = 0) -> Job:
    parts = {p: run(f"{name}/{p}", tags, points, i) for i, p in enumerate(("train", "validation"))}
    return Job(name, None, parts, "live", None, (), (), version=version)


def refresh_ms(pick: Any, size: tuple[int, int], color: bool, memory: GridMemory) -> float:
    """One refresh: the charted jobs picked, the page drawn, rendered to a terminal."""
    start = time.perf_counter()
    text = draw_page(pick(), GridState(), size[0], size[1] - 1, memory, color)
    console = Console(file=io.StringIO(), width=size[0], height=size[1],
                      color_system="truecolor" if color else None, force_terminal=True)
    console.print(text, crop=True)
    return (time.perf_counter() - start) * 1000


def measure(name: str, pick: Any, repeats: int) -> list[float]:
    """Medians: every shown series new (each smoothed and drawn again, a fresh memory), and
    none new (the job's version moved, its shown series the same: the grid's memory)."""
    worst = []
    for size in SIZES:
        for color in (True, False):
            cold = [refresh_ms(pick, size, color, GridMemory()) for _ in range(repeats)]
            memory = GridMemory()
            warm = [refresh_ms(pick, size, color, memory) for _ in range(repeats + 1)][1:]
            worst.append(statistics.median(cold))
            print(f"{name:34s} {size[0]}x{size[1]} {'colour' if color else 'NO_COLOR':8s} "
                  f"all new {statistics.median(cold):6.1f} ms (max {max(cold):5.1f})  "
                  f"none new {statistics.median(warm):5.1f} ms")
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--sweep", type=int, default=10_000)
    parser.add_argument("--tags", type=int, default=200)
    args = parser.parse_args()

    sweep = [job(f"sweep/lr_{i:05d}", ("epoch_loss", "epoch_accuracy"), 200, i)
             for i in range(args.sweep)]
    focused = views.ViewState(focused_job=sweep[args.sweep // 2].name)

    def pick_sweep() -> tuple[Job, ...]:
        return views.charted(focused, sweep, sweep, ())

    groups = max(1, int(math.sqrt(args.tags)))
    tags = [f"group{i % groups:02d}/tag{i:03d}" for i in range(args.tags)]
    wide = job("wide", tags, 2000)
    print(f"== chart grid per refresh, medians of {args.repeats} (target <= {TARGET_MS:.0f} ms); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    worst = measure(f"{args.sweep:,}-run sweep, focused job", pick_sweep, args.repeats)
    worst += measure(f"1 job, {args.tags} tags x 2 runs x 2,000", lambda: (wide,), args.repeats)
    print(f"worst median {max(worst):.1f} ms: "
          f"{'within' if max(worst) <= TARGET_MS else 'OVER'} the {TARGET_MS:.0f} ms target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
