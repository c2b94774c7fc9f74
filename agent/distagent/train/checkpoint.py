"""Checkpoints: model, optimizer, global step and the epoch's running sums, under `checkpoints/`.

The position in the data is the global step: the train dataset is one deterministic stream
(seeded shuffle, repeated forever) consumed one global batch per step, so a resumed run skips
`step` batches of a fresh stream and continues where the checkpoint was taken.

Multi-worker: every worker must take part in a save (reading distributed variables can need
collectives), but only the chief's files are kept; the others save into a scratch directory
that is deleted right away, as TensorFlow's multi-worker guide does. All restore the chief's.

A save writes into `ckpt-<step>_temp/` first; one killed or refused (a full disk) leaves it
behind. The chief removes its own at start and at the end, and before run.json is written over
on a full disk; a refused save is one line ("checkpoint save failed: disk full on <dir>").
"""

from __future__ import annotations

import glob
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

import tensorflow as tf

from distagent.cluster.faults import first_line
from distcore import names
from distcore.errors import DistmonError, StorageError, storage_problem

MAX_TO_KEEP = 3
# tf.train.CheckpointManager's default checkpoint_name, and the directory its save writes into.
_PARTIAL = re.compile(r"ckpt-\d+_temp")


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
        """Restore the newest checkpoint; returns its path, or None when there is none. A
        checkpoint that cannot be read, or is another job's, is a DistmonError naming it."""
        path = self.latest()
        if path is None:
            return None
        problem = self._restore(path)
        if problem is not None:
            _quiet_unrestored_notes()
            raise DistmonError(problem)
        return path

    def _restore(self, path: str) -> str | None:
        try:
            self.checkpoint.restore(path).assert_existing_objects_matched()
        except (AssertionError, ValueError, IndexError, tf.errors.OpError) as err:
            return restore_problem(path, self.directory, err)
        return None

    def save(self, step: int) -> None:
        if self.last_saved_step == step:
            return
        try:
            self.manager.save(checkpoint_number=step)
        except tf.errors.OpError as err:
            problem = storage_problem(err, self._save_dir)
            if problem is None:  # a lost peer, ...: named by the cluster code
                raise
            self.remove_partial()
            raise StorageError(f"checkpoint save failed: {problem}") from None
        self.last_saved_step = step
        if not self.is_chief:
            shutil.rmtree(self._save_dir, ignore_errors=True)

    def remove_partial(self) -> None:
        """This job's unfinished saves (`ckpt-<step>_temp/` in its own save directory)."""
        try:
            entries = list(os.scandir(self._save_dir))
        except OSError:
            return
        for entry in entries:
            if _PARTIAL.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)


_CORRUPT_INDEX = ("not an sstable", "bad magic number")
_CORRUPT_DATA = ("Read less bytes than requested", "Checksum does not match")


def restore_problem(path: str, directory: Path, err: BaseException) -> str:
    """The one line for a checkpoint that cannot be restored, naming the file at fault.

    TensorFlow names none of them: a truncated data file is an IndexError ("Read less bytes
    than requested"), a damaged one a checksum DataLoss, a damaged index "not an sstable"."""
    reason = op_error_line(err)
    way_out = f"use another run.name or remove {directory}"
    if isinstance(err, tf.errors.DataLossError) or any(m in reason for m in _CORRUPT_DATA):
        return f"{_data_files(path)}: truncated or corrupt ({reason}); cannot resume from " \
               f"{path}: {way_out}"
    if any(m in reason for m in _CORRUPT_INDEX):
        return f"{path}.index: corrupt ({reason}); cannot resume from {path}: {way_out}"
    if "No such file or directory" in reason:
        return f"{_data_files(path)}: missing; cannot resume from {path}: {way_out}"
    return (f"{path} does not fit this job ({reason}); resuming needs the same model, input "
            f"shape and optimizer: {way_out}")


_UNRESTORED_NOTES = (
    "Detecting that an object or model or tf.train.Checkpoint is being deleted with unrestored",
    "Value in checkpoint could not be found in the restored object",
    "An attribute in the restored object could not be found in the checkpoint",
)


class _UnrestoredNotesFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_UNRESTORED_NOTES)


def _quiet_unrestored_notes() -> None:
    """A failed restore leaves TensorFlow's "deleted with unrestored values" warnings for when
    its objects are freed (at exit): the one-line error has said what matters, so they go."""
    logger = tf.get_logger()
    if not any(isinstance(f, _UnrestoredNotesFilter) for f in logger.filters):
        logger.addFilter(_UnrestoredNotesFilter())


def op_error_line(err: BaseException) -> str:
    """TensorFlow's message without its "{{function_node ...}}" prefix nor its "Graph execution
    error" preamble, one line, bounded."""
    line = re.sub(r"^\{\{[^}]*\}\}\s*", "", first_line(str(err), limit=200))
    return line or type(err).__name__


def _data_files(prefix: str) -> str:
    """The checkpoint's data file (or files, when sharded), as the user would look for them."""
    found = sorted(glob.glob(glob.escape(prefix) + ".data-*"))
    return ", ".join(found) if found else prefix + ".data-00000-of-00001"
