"""A job's ledger as text: one line for `--once` and the details panel, and one bar of cells
(a segment per bucket, as wide as its share of the wall time) for the dashboard.

Pure strings, no Textual and no rich: the widget colours the bar's segments by bucket. A bucket
nobody measured reads `–`; a ledger from the events alone says what the points prove.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from distcore.jobs.ledger import BUCKETS, Ledger
from distmon.formats import UNKNOWN, share

BUCKET_STYLES: Final = {
    "compute": "green", "input_wait": "yellow", "startup": "blue", "checkpoint": "cyan",
    "restore": "cyan", "evaluation": "magenta", "recovery": "red", "lost": "bold red",
    "scheduler": "grey50", "teardown": "blue", "unknown": "grey30",
}  # fmt: skip
BUCKET_MARKS: Final = {
    "compute": "█", "input_wait": "▓", "startup": "▒", "checkpoint": "░", "restore": "░",
    "evaluation": "▚", "recovery": "╳", "lost": "╳", "scheduler": "┄", "teardown": "▒",
    "unknown": "·",
}  # fmt: skip
SOURCES: Final = {"agent": "run.json", "scalars": "time/ tags", "events": "events only"}


def duration(seconds: float | None) -> str:
    """`12.3 s`, `4m 05s`, `2h 03m`; `–` when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return UNKNOWN
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h {int(seconds % 3600 // 60):02d}m"


def ledger_line(ledger: Ledger) -> str:
    """`wall 1m 25s, goodput 2%: compute 1.6 s (2%), ..., unknown 1.3 s (1%)  [run.json]`."""
    head = f"wall {duration(ledger.wall_seconds)}, goodput {share(ledger.goodput)}"
    if ledger.source == "events":
        gaps = f"{ledger.gaps} gap{'' if ledger.gaps == 1 else 's'} between points"
        if ledger.gaps:
            gaps += f" ({duration(ledger.gap_seconds)})"
        return f"{head}: {gaps}; every bucket {UNKNOWN}  [{SOURCES[ledger.source]}]"
    cells = []
    for bucket in BUCKETS:
        seconds = ledger.buckets.get(bucket)
        if seconds is None:
            cells.append(f"{bucket} {UNKNOWN}")
        elif seconds > 0 or bucket in ("compute", "unknown"):
            cells.append(f"{bucket} {duration(seconds)} ({share(ledger.share(bucket))})")
    return f"{head}: {', '.join(cells)}  [{SOURCES[ledger.source]}]"


def bar_segments(ledger: Ledger, width: int) -> list[tuple[str, int]]:
    """(bucket, cells) left to right, `width` cells in all, each bucket's cells its share of
    the wall; empty when the wall or every bucket is unknown."""
    return share_cells([(b, ledger.buckets.get(b)) for b in BUCKETS], width)


def share_cells(amounts: Sequence[tuple[str, float | None]], width: int) -> list[tuple[str, int]]:
    """(name, cells) left to right for the positive finite amounts, `width` cells in all, each
    its share of their sum (largest remainders get the cells rounding left over); empty when
    there is nothing to share."""
    parts = [(b, s) for b, s in amounts if s is not None and 0 < s < math.inf]
    if width <= 0 or not parts:
        return []
    biggest = max(s for _, s in parts)  # shares of the biggest: no sum overflows to inf
    total = sum(s / biggest for _, s in parts)
    exact = [(b, s / biggest / total * width) for b, s in parts]
    cells = {b: int(x) for b, x in exact}
    left = width - sum(cells.values())
    for b, _ in sorted(exact, key=lambda bx: bx[1] - int(bx[1]), reverse=True)[:left]:
        cells[b] += 1
    return [(b, cells[b]) for b, _ in parts if cells[b] > 0]


def bar_text(segments: Sequence[tuple[str, int]]) -> str:
    """The bar as plain characters (one mark per bucket): what the widget colours."""
    return "".join(BUCKET_MARKS[b] * n for b, n in segments)
