"""A log point's scalars are written by a thread of their own (summaries.Writers): every point
handed over is in the event files TensorBoard reads once the writers close, however far the
thread fell behind, and a write that fails there is raised on the caller's thread."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from distagent.train.summaries import QUEUE_POINTS, Writers
from distcore import names
from tests.agent.test_train_loop import _scalars

TAGS = (names.LOSS, names.LEARNING_RATE, names.STEP_TIME_MS)


def test_every_point_handed_over_is_read_by_tensorboard(tf: Any, tmp_path: Path) -> None:
    writers = Writers(tmp_path)
    points = 3 * QUEUE_POINTS  # more than the queue holds: the caller waits, nothing is dropped
    try:
        for step in range(1, points + 1):
            writers.write_compiled(names.TRAIN_DIR, step, {t: step / (i + 1)
                                                          for i, t in enumerate(TAGS)})
        assert "distagent-summaries" in {t.name for t in threading.enumerate()}
    finally:
        writers.close()
    assert "distagent-summaries" not in {t.name for t in threading.enumerate()}
    read = _scalars(tmp_path / names.TRAIN_DIR)
    for i, tag in enumerate(TAGS):
        assert read[tag] == [(s, pytest.approx(s / (i + 1))) for s in range(1, points + 1)]


def test_a_failed_write_is_raised_on_the_callers_thread(tf: Any, tmp_path: Path) -> None:
    (tmp_path / names.TRAIN_DIR).write_text("a file where the run's directory goes")
    writers = Writers(tmp_path)
    writers.write_compiled(names.TRAIN_DIR, 1, {names.LOSS: 1.0})
    with pytest.raises(tf.errors.FailedPreconditionError, match="Not a directory"):
        writers.close()
