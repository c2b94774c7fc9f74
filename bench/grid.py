"""The chart grid's cost per refresh (the dashboard's `v` screen, and `--once --plot`).

Two jobs, as the job index hands them to the dashboard (the store's own series and columns):
- a 10,000-run sweep (200 points a run, loss and accuracy), its one focused job charted: the
  jobs the grid charts are picked out of the sweep, then the page drawn;
- a job with 200 tags, train and validation, 2,000 points a series (the store's default bound).
A refresh draws a page at 160x48 and 240x60, in colour and without, and renders it as a
terminal would (Rich segments): when the grid opens, when every series got a point (a live
job), when nothing changed. Target: <= 100 ms a refresh.

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
import timeit
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
PARTS = ("train", "validation")


class LiveJob:
    """A job whose every series gains a point per refresh, as the store holds it (its
    SeriesBuffers, read-only snapshots): each refresh's Job has new Series and arrays."""

    def __init__(self, name: str, tags: Sequence[str], points: int) -> None:
        import numpy as np

        self.name, self.version, self.step = name, 0, points
        self.buffers = {p: [SeriesBuffer(t, points * 2) for t in tags] for p in PARTS}
        steps = np.arange(points, dtype=np.int64)
        for i, buffer in enumerate(b for p in PARTS for b in self.buffers[p]):
            values: Any = 2.0 * np.exp(-steps / (points / 3)) + 0.05 * np.sin(steps * 0.37 + i)
            walls: Any = 1.7e9 + steps * 0.1
            buffer.extend(steps, walls, values)
        self.job = self._snapshot()

    def grow(self) -> None:
        """One more point in every series; the next refresh's Job."""
        import numpy as np

        steps = np.array([self.step], dtype=np.int64)
        walls: Any = np.array([1.7e9 + self.step * 0.1])
        for buffer in (b for p in PARTS for b in self.buffers[p]):
            buffer.extend(steps, walls, np.array([0.5]))
        self.step += 1
        self.version += 1
        self.job = self._snapshot()

    def _snapshot(self) -> Job:
        parts = {p: _run(f"{self.name}/{p}", [b.snapshot() for b in self.buffers[p]])
                 for p in PARTS}
        return Job(self.name, None, parts, "live", None, (), (), version=self.version)


def _run(name: str, series: Sequence[Any]) -> RunSnapshot:
    return RunSnapshot(name=name, path=RunLocation.on_this_machine(Path("/logs") / name),
                       status="live", files=1, problems=(), hparams={},
                       scalars={s.tag: s for s in series}, last_update=1.7e9,
                       last_modified=1.7e9)


def refresh_ms(pick: Any, size: tuple[int, int], color: bool, memory: GridMemory) -> float:
    """One refresh: the charted jobs picked, the page drawn, rendered to a terminal."""
    start = time.perf_counter()
    text = draw_page(pick(), GridState(), size[0], size[1] - 1, memory, color)
    console = Console(file=io.StringIO(), width=size[0], height=size[1],
                      color_system="truecolor" if color else None, force_terminal=True)
    console.print(text, crop=True)
    return (time.perf_counter() - start) * 1000


def measure(name: str, live: LiveJob, pick: Any, repeats: int) -> list[float]:
    """Medians of three refreshes: the grid opened (every shown series smoothed and drawn, a
    fresh memory); a point more in every series (the grid open: each series' new point
    smoothed on, every chart drawn again); nothing new (the job's version moved alone)."""
    worst = []
    for size in SIZES:
        for color in (True, False):
            opened = [refresh_ms(pick, size, color, GridMemory()) for _ in range(repeats)]
            memory = GridMemory()
            refresh_ms(pick, size, color, memory)
            grown, same = [], []
            for _ in range(repeats):
                live.grow()
                grown.append(refresh_ms(pick, size, color, memory))
                same.append(refresh_ms(pick, size, color, memory))
            worst += [statistics.median(opened), statistics.median(grown)]
            print(f"{name:30s} {size[0]}x{size[1]} {'colour' if color else 'NO_COLOR':8s} "
                  f"opened {statistics.median(opened):6.1f} ms  "
                  f"a point more {statistics.median(grown):6.1f} ms  "
                  f"nothing new {statistics.median(same):5.1f} ms")
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--sweep", type=int, default=10_000)
    parser.add_argument("--tags", type=int, default=200)
    args = parser.parse_args()

    small = ("epoch_loss", "epoch_accuracy")
    sweep = [LiveJob(f"sweep/lr_{i:05d}", small, 200).job for i in range(args.sweep)]
    live = LiveJob(sweep[args.sweep // 2].name, small, 200)
    focused = views.ViewState(focused_job=live.name)

    def pick_sweep() -> tuple[Job, ...]:
        sweep[args.sweep // 2] = live.job
        return views.charted(focused, sweep, sweep, ())

    groups = max(1, int(math.sqrt(args.tags)))
    wide = LiveJob("wide", [f"group{i % groups:02d}/tag{i:03d}" for i in range(args.tags)], 2000)
    reference = min(timeit.repeat("sum(range(10**6))", number=1, repeat=5)) * 1000
    print(f"== chart grid per refresh, medians of {args.repeats} (target <= {TARGET_MS:.0f} ms); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"sum(range(10**6)) {reference:.0f} ms here, to scale by")
    worst = measure(f"{args.sweep:,}-run sweep, focused", live, pick_sweep, args.repeats)
    worst += measure(f"1 job, {args.tags} tags x 2 x 2,000", wide, lambda: (wide.job,),
                     args.repeats)
    print(f"worst median {max(worst):.1f} ms: "
          f"{'within' if max(worst) <= TARGET_MS else 'OVER'} the {TARGET_MS:.0f} ms target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
