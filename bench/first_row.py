"""The dashboard's first row on a sweep, for before/after runs of several checkouts, alternating.

Each round starts `python -m distmon --no-gpu SWEEP` in tmux (160x48, bench/dashboard.py's
Terminal) once per checkout (PYTHONPATH on its shared/ and tui/), in turn, and measures the
seconds until the first `lr-sweep-` row is on screen, with the CPU seconds the process had
taken then (all threads, and the UI thread's). Every distmon runs as a user's install does,
from byte-code caches (bench/_installed.py): in a cache folder of this benchmark's own
(PYTHONPYCACHEPREFIX), filled by one untimed start per checkout, so that no checkout is written
to. Medians over the rounds; CPU seconds are the fairer figure on a loaded machine, whose load
average is printed with each round. Target (a 10,000-run sweep): first row within 1 s.

    python bench/first_row.py [--runs 10000] [--steps 1000] [--rounds 4] [CHECKOUT ...]
                                                                    (default: this one)
A 100,000-run sweep of tiny runs (`--runs 100000 --steps 10`): target 1 s too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _installed as installed  # bench/ is not a package
import dashboard as dash
import sweep


def command(checkout: Path, root: Path, cache: Path) -> str:
    env = f"PYTHONPATH={checkout}/shared:{checkout}/tui PYTHONPYCACHEPREFIX={cache}"
    return f"{installed.UNSET} {env} {sys.executable} -m distmon --no-gpu {root}"


def first_row(checkout: Path, root: Path, cache: Path, timeout: float) -> dict[str, float]:
    load = os.getloadavg()[0]
    term = dash.Terminal(command(checkout, root, cache))
    try:
        seconds = term.wait_for(lambda s: "lr-sweep-" in s, timeout)
        cpu = sweep.thread_cpu(term.pid())
    finally:
        term.close()
    if seconds is None:
        raise SystemExit(f"{checkout}: no row within {timeout:.0f} s")
    return {"seconds": seconds, "cpu": cpu["process"], "ui": cpu["ui"], "load": load}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "checkouts",
        nargs="*",
        type=Path,
        metavar="CHECKOUT",
        help="checkouts to compare (default: this one)",
    )
    parser.add_argument("--runs", type=int, default=10_000, help="the sweep's runs (2x1000)")
    parser.add_argument("--steps", type=int, default=1000, help="steps a run (2 tags)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    args.checkouts = args.checkouts or [Path(__file__).resolve().parents[1]]
    root = sweep.ensure_sweep(sweep.DEFAULT_CACHE, args.runs, 2, args.steps)
    results: dict[Path, list[dict[str, float]]] = {c: [] for c in args.checkouts}
    with tempfile.TemporaryDirectory(prefix="distmon-first-row-pyc-") as cache:
        for checkout in args.checkouts:  # untimed: writes the caches, warms the page cache
            first_row(checkout, root, Path(cache), args.timeout)
        for n in range(args.rounds):
            for checkout in args.checkouts:
                one = first_row(checkout, root, Path(cache), args.timeout)
                results[checkout].append(one)
                print(f"round {n + 1} {checkout}: first row {one['seconds']:.2f} s, CPU "
                      f"{one['cpu']:.2f} s (UI thread {one['ui']:.2f}), load {one['load']:.1f}",
                      flush=True)  # fmt: skip
                time.sleep(1)  # the last one's exit
    print(f"\n== first row on {args.runs:,} runs, medians of {args.rounds} (target 1 s)")
    for checkout, rounds in results.items():
        med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        print(f"{checkout!s:<40} {med['seconds']:5.2f} s   CPU {med['cpu']:.2f} s (UI "
              f"{med['ui']:.2f})   load {med['load']:.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
