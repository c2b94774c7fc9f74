"""Helpers for the event reader's tests: reading a logdir and checking both decoders agree (the
writers are the kit's, tests/kit/writers.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from distcore.events import RunStore, load_once
from distcore.events.snapshots import RunSnapshot
from distcore.tfrecord import Batch, decode


def only_run(root: Path, store: RunStore | None = None) -> RunSnapshot:
    if store is None:
        assert_files_decode_alike(root)  # every logdir these tests read checks both decoders
    runs = store.snapshot() if store is not None else load_once([root])
    assert len(runs) == 1, [r.name for r in runs]
    return runs[0]


def steps_values(run: RunSnapshot, tag: str) -> list[tuple[int, float]]:
    series = run.scalars[tag]
    return list(zip(series.steps, series.values, strict=True))


def _bits(array: np.ndarray) -> list[int]:
    """Exact comparison, NaN payloads included."""
    return array.view(np.int64).tolist() if array.dtype == np.float64 else array.tolist()


def batch_key(batch: Batch | None) -> object:
    if batch is None:
        return None
    segments = [
        (
            segment.restart_at,
            {tag: tuple(_bits(a) for a in arrays) for tag, arrays in segment.points.items()},
        )
        for segment in batch.segments
    ]
    # Drop segments that hold nothing and restart nothing: they carry no information.
    segments = [s for s in segments if s[1] or s[0] is not None]
    hparams = {k: repr(v) for k, v in batch.hparams.items()}
    return segments, hparams, batch.problems, repr(batch.newest_wall_time)


def assert_grouped_equals_per_record(data: bytes, plugins: dict[str, str] | None = None) -> None:
    """The decoder (the kernel, where it is built) yields exactly what the reference path
    (the per-record decoder) yields."""
    plugins_a, plugins_b = dict(plugins or {}), dict(plugins or {})
    grouped, used_a = decode(data, plugins_a)
    reference, used_b = decode(data, plugins_b, reference=True)
    assert used_a == used_b
    assert batch_key(grouped) == batch_key(reference)
    assert plugins_a == plugins_b


def assert_files_decode_alike(root: Path) -> None:
    for path in sorted(root.rglob("*tfevents*")):
        if path.is_file():
            assert_grouped_equals_per_record(path.read_bytes())


# Real event files from other projects (../shared/wild beside the checkout; SOURCES.md there).
# CI lays a copy of shared/ beside its clone: there a missing corpus is a failure, not a skip.
WILD = Path(__file__).resolve().parents[2].parent / "shared" / "wild"


def require_wild() -> None:
    import os

    import pytest

    if not WILD.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"the real event files are missing: {WILD}")
        pytest.skip(f"no {WILD}: runs with the shared/ folder (its wild/ event files) beside "
                    "the checkout")
