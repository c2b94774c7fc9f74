"""Checkpoints: model, optimizer, global step and the epoch's running sums, under `checkpoints/`.

The position in the data is the global step: the train dataset is one deterministic stream
(seeded shuffle, repeated forever) consumed one global batch per step, so a resumed run skips
`step` batches of a fresh stream and continues where the checkpoint was taken.

Multi-worker: every worker must take part in a save (reading distributed variables can need
collectives), but only the chief's files are kept; the others save into a scratch directory
that is deleted right away, as TensorFlow's multi-worker guide does. All restore the chief's.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import tensorflow as tf

from distcore import names
from distcore.errors import DistmonError

MAX_TO_KEEP = 3


class Checkpointer:
    def __init__(
        self,
        run_dir: Path,
        objects: dict[str, Any],
        *,
        is_chief: bool = True,
        task_index: int = 0,
    ) -> None:
        self.directory = run_dir / names.CHECKPOINT_DIR
        self.is_chief = is_chief
        self.checkpoint = tf.train.Checkpoint(**objects)
        save_dir = self.directory if is_chief else self.directory / f".worker-{task_index}"
        self._save_dir = save_dir
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, str(save_dir), max_to_keep=MAX_TO_KEEP
        )
        self.last_saved_step: int | None = None

    def latest(self) -> str | None:
        path = tf.train.latest_checkpoint(str(self.directory))
        return str(path) if path else None

    def restore(self) -> str | None:
        """Restore the newest checkpoint; returns its path, or None when there is none."""
        path = self.latest()
        if path is None:
            return None
        try:
            self.checkpoint.restore(path).assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.OpError) as err:
            reason = str(err).strip().splitlines()[0][:200]
            raise DistmonError(
                f"{path} does not fit this job ({reason}); resuming needs the same model, "
                f"input shape and optimizer: use another run.name or remove {self.directory}"
            ) from err
        return path

    def save(self, step: int) -> None:
        if self.last_saved_step == step:
            return
        self.manager.save(checkpoint_number=step)
        self.last_saved_step = step
        if not self.is_chief:
            shutil.rmtree(self._save_dir, ignore_errors=True)
