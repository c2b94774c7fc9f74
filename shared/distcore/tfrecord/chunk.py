"""The decoder's one entry: the bytes of an event file in, a Batch and the bytes consumed out."""

from __future__ import annotations

import numpy as np

from distcore.tfrecord.batch import Batch, decode_frames
from distcore.tfrecord.buffers import PADDING
from distcore.tfrecord.framing import frame


def decode(
    data: bytes | bytearray,
    plugins: dict[str, str],
    *,
    size: int | None = None,
    base_offset: int = 0,
    grouped: bool = True,
) -> tuple[Batch | None, int]:
    """Decode the complete records at the start of data[:size], the bytes of an event file from
    `base_offset` (a record boundary) on: any byte source (a local file, SSH, an object store)
    feeds the same framing and decoding. `plugins` (tag -> plugin of this run) is read and
    updated. Returns the batch (None when no record is complete yet) and how many bytes it
    consumed; problem offsets are made absolute with `base_offset`.

    A bytearray with PADDING spare bytes past `size` is used in place; anything else is copied
    into one. `grouped=False` decodes record by record (the reference the grouped decoder must
    equal)."""
    size = len(data) if size is None else size
    if isinstance(data, bytearray) and len(data) >= size + PADDING:
        raw = data
    else:
        raw = bytearray(size + PADDING)
        raw[:size] = data[:size]
    buf = np.frombuffer(raw, dtype=np.uint8)
    frames = frame(raw, buf, size)
    if frames.end == 0:
        return None, 0
    batch = decode_frames(raw, buf, frames, plugins, grouped=grouped)
    if base_offset:
        batch.problems = [(kind, off + base_offset) for kind, off in batch.problems]
    return batch, frames.end
