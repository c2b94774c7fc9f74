"""The decoder's entries, and the one place that picks its path: the compiled kernel
(kernel.ACTIVE) where it is built, else the reference path in plain Python (reference.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import distcore.tfrecord.kernel as kernel
from distcore.tfrecord.batch import Batch, decode_frames
from distcore.tfrecord.framing import PADDING, frame
from distcore.tfrecord.many import Span
from distcore.tfrecord.many import decode_files as decode_together
from distcore.tfrecord.reference import decode_files as decode_alone
from distcore.tfrecord.reference import decode_records


def decode(
    data: bytes | bytearray,
    plugins: dict[str, str],
    *,
    size: int | None = None,
    base_offset: int = 0,
    reference: bool = False,
) -> tuple[Batch | None, int]:
    """Decode the complete records at the start of data[:size], the bytes of an event file from
    `base_offset` (a record boundary) on: any byte source (a local file, SSH, an object store)
    feeds the same framing and decoding. `plugins` (tag -> plugin of this run) is read and
    updated. Returns the batch (None when no record is complete yet) and how many bytes it
    consumed; problem offsets are made absolute with `base_offset`.

    A bytearray with PADDING spare bytes past `size` is used in place; anything else is copied
    into one. `reference=True` takes the reference path whatever is built (the tests' oracle)."""
    size = len(data) if size is None else size
    if isinstance(data, bytearray) and len(data) >= size + PADDING:
        raw = data
    else:
        raw = bytearray(size + PADDING)
        raw[:size] = data[:size]
    buf = np.frombuffer(raw, dtype=np.uint8)
    compiled = None if reference else kernel.ACTIVE
    frames = frame(raw, buf, size, compiled)
    if frames.end == 0:
        return None, 0
    if compiled is None:
        batch = decode_records(raw, frames, plugins)
    else:
        batch = decode_frames(raw, buf, frames, plugins, compiled)
    if base_offset:
        batch.problems = [(kind, off + base_offset) for kind, off in batch.problems]
    return batch, frames.end


def decode_files(
    raw: bytearray,
    size: int,
    groups: Sequence[Sequence[Span]],
    plugins: Callable[[int], dict[str, str]],
) -> list[list[Batch | None] | None]:
    """Decode raw[:size] (padded past `size`), which holds `groups` of files back to back: for
    each group (the files of one run) each file's batch as a lone read of it would give it,
    or None where the caller is to read the group's files one by one (many.py says when)."""
    compiled = kernel.ACTIVE
    if compiled is None:
        return decode_alone(raw, groups, plugins)
    return decode_together(raw, size, groups, plugins, compiled)
