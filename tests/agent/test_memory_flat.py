"""What a log point leaves behind: nothing that stays, however many points a run writes.

TensorFlow keeps every Python number an eager op converts, for the life of the process, so the
agent's memory grew with each point it wrote. These tests write points through the agent's own
writer and schedule reader (real TensorFlow, real event files) and count, with tracemalloc, the
memory blocks still alive after many more points: with Python numbers that count grows by
several blocks per point.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distagent.train.schedule import WarmupDecay, rate_reader
from distagent.train.summaries import Writers
from distcore import names

TAGS = (names.LOSS, names.ACCURACY, names.LEARNING_RATE, names.EXAMPLES_PER_SECOND,
        names.STEP_TIME_MS, names.INPUT_WAIT_MS, names.INPUT_WAIT_FRACTION, names.GRAD_NORM)


def live_blocks_growth(write: Callable[[int], object], first: int, more: int) -> int:
    """Blocks alive after `first + more` points less those alive after `first` (both traced
    from the same start, after a warm-up that traces TensorFlow's one-off caches)."""
    for step in range(20):
        write(step)
    tracemalloc.start(1)
    try:
        for step in range(20, 20 + first):
            write(step)
        gc.collect()
        before = sum(s.count for s in tracemalloc.take_snapshot().statistics("filename"))
        for step in range(20 + first, 20 + first + more):
            write(step)
        gc.collect()
        after = sum(s.count for s in tracemalloc.take_snapshot().statistics("filename"))
    finally:
        tracemalloc.stop()
    return after - before


def test_writing_points_keeps_no_memory(tf: Any, tmp_path: Path) -> None:
    writers = Writers(tmp_path)

    def write(step: int) -> None:  # fresh Python floats, as the loop's scalars are
        writers.write(names.TRAIN_DIR, step, {t: (step + i) / 7.0 for i, t in enumerate(TAGS)})

    try:
        growth = live_blocks_growth(write, 100, 1200)
    finally:
        writers.close()
    # ~300 measured alone (TensorFlow's bounded caches filling, more after other tests in the
    # same process); Python floats kept ~1,000 per 400 points, ~3,000 here
    assert growth < 1500, f"{growth} blocks kept by 1,200 log points of {len(TAGS)} tags"
    assert list((tmp_path / names.TRAIN_DIR).glob("*tfevents*"))


def test_reading_the_rate_keeps_no_memory(tf: Any) -> None:
    schedule = WarmupDecay(base_rate=0.1, scaled_rate=0.4, warmup_steps=50, total_steps=5000,
                           decay="cosine")
    rate_at = rate_reader(schedule)
    assert abs(rate_at(0) - 0.1) < 1e-6 and abs(rate_at(50) - 0.4) < 1e-6

    growth = live_blocks_growth(rate_at, 100, 1200)
    # ~80 measured; the schedule called eagerly kept ~600 blocks per 400 readings
    assert growth < 300, f"{growth} blocks kept by 1,200 rate readings"
