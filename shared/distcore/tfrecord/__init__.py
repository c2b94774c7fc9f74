"""distcore.tfrecord: TensorBoard event files' framing, CRC and decoding, as a leaf package.

One entry, `decode(data, plugins) -> (Batch | None, consumed)`, used by the local reader
(distcore.events.reader) and the remote tails (distcore.remote.tail) alike, and `decode_files`
for a sweep's many small files at once (distcore.events.many); kernel.py picks the path they
take. It imports nothing from distcore.events, jobs or remote (pyproject.toml's layers
contract). The names below load lazily: `import distcore.tfrecord` costs nothing until one is
used (numpy, protobuf and TensorBoard's protos come with the decoder, not with the package).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from distcore.lazy import lazy_names

if TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from distcore.tfrecord.framing import (
        FOOTER,
        HEADER,
        MAX_RECORD,
        PADDING,
        ZERO_BYTES,
        find_header,
    )
    from distcore.tfrecord.kernel import decode, decode_files
    from distcore.tfrecord.record import Batch, Segment

_LAZY = {
    **dict.fromkeys(["FOOTER", "HEADER", "MAX_RECORD", "PADDING", "ZERO_BYTES", "find_header"],
                    "framing"),
    **dict.fromkeys(["decode", "decode_files"], "kernel"),
    **dict.fromkeys(["Batch", "Segment"], "record"),
}  # fmt: skip
__all__ = ["FOOTER", "HEADER", "MAX_RECORD", "PADDING", "ZERO_BYTES", "Batch", "Segment",
           "decode", "decode_files", "find_header"]  # fmt: skip
__getattr__ = lazy_names(__name__, _LAZY)
