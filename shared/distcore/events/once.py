"""One pass over some logdirs: every run read once, nothing watched."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from distcore.events.snapshots import RunSnapshot
from distcore.events.store import RunStore
from distcore.events.watch import LogdirWatcher


def load_once(
    roots: Sequence[Path], *, poll: bool = False, max_points: int = 2000
) -> tuple[RunSnapshot, ...]:
    """Read every run under the roots once. `poll` is accepted for symmetry: one pass reads
    the files directly, so it watches nothing."""
    store = RunStore(max_points=max_points)
    LogdirWatcher(roots, store, poll=poll).scan_once()
    return store.snapshot()
