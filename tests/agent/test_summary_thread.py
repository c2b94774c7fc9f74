"""A log point's scalars are written by a thread of their own (summaries.Writers): every point
handed over is in the event files TensorBoard reads once the writers close, however far the
thread fell behind, and a write that fails there is raised on the caller's thread."""

from __future__ import annotations

import threading
import time
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


def test_every_point_up_to_a_checkpoint_is_on_disk_before_it_is_saved(
    tf: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resume starts after its checkpoint and never writes those points again: had the
    checkpoint been saved while the writing thread still held them (its first compiled write
    traces a function, seconds on a loaded machine), a kill -9 then lost them for good."""
    from distagent.train import run_job
    from distagent.train.checkpoint import Checkpointer
    from tests.agent.test_train_loop import LOG_STEPS, job

    write, save = Writers._write_compiled, Checkpointer.save
    missing: dict[int, list[int]] = {}

    def slow_write(self: Writers, *point: Any) -> None:
        time.sleep(0.3)  # a thread that fell behind
        write(self, *point)

    def checked_save(self: Checkpointer, step: int) -> None:
        train = tmp_path / "ckpt" / names.TRAIN_DIR
        written = {s for s, _ in _scalars(train).get(names.LOSS, [])} if train.is_dir() else set()
        missing[step] = [s for s in LOG_STEPS if s <= step and s not in written]
        save(self, step)

    monkeypatch.setattr(Writers, "_write_compiled", slow_write)
    monkeypatch.setattr(Checkpointer, "save", checked_save)
    assert run_job(job(tmp_path, "ckpt")) == names.STATUS_FINISHED
    assert sorted(missing) == [4, 8, 10, 12, 16, 20]
    assert not any(missing.values()), missing
