"""distcore.tfrecord: TensorBoard event files' framing, CRC and decoding, as a leaf package.

One entry, `decode(data, plugins) -> (Batch | None, consumed)`, used by the local reader
(distcore.events.reader) and the remote tails (distcore.remote.tail) alike, and
`decode_files` for a sweep's many small files at once (distcore.events.many). It imports nothing
from distcore.events, jobs or remote (pyproject.toml's layers contract). The names below load
lazily: `import distcore.tfrecord` costs nothing until one is used (numpy, protobuf and
TensorBoard's protos come with the decoder, not with the package).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from distcore.lazy import lazy_names

if TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from distcore.tfrecord.batch import Batch, Segment
    from distcore.tfrecord.chunk import decode, decode_files
    from distcore.tfrecord.framing import (
        FOOTER,
        HEADER,
        MAX_RECORD,
        PADDING,
        ZERO_BYTES,
        find_header,
    )

_LAZY = {
    "Batch": "batch",
    "Segment": "batch",
    "PADDING": "framing",
    "decode": "chunk",
    "decode_files": "chunk",
    "FOOTER": "framing",
    "HEADER": "framing",
    "MAX_RECORD": "framing",
    "ZERO_BYTES": "framing",
    "find_header": "framing",
}

__all__ = [
    "FOOTER",
    "HEADER",
    "MAX_RECORD",
    "PADDING",
    "ZERO_BYTES",
    "Batch",
    "Segment",
    "decode",
    "decode_files",
    "find_header",
]


__getattr__ = lazy_names(__name__, _LAZY)
