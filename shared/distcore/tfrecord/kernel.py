"""The one place that picks the decoder's path, once, on import: the compiled kernel
(_kernel*.c, listed in _kernel.c) where it is built, else the reference path in plain Python
(reference.py: same results, more CPU). Every caller goes through the entries below; none
looks at which path runs.

DISTMON_PURE=1 in the environment forces the reference path (tests run both and compare them).
A wheel carries the kernel; `pip install` from source builds it with the system's C compiler
and Python's headers where both are found, and installs without it where not (setup.py marks
it optional).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # the decoder's modules load with its first use, not with describe()'s
    from distcore.tfrecord.framing import F64, I64
    from distcore.tfrecord.many import Span
    from distcore.tfrecord.record import Batch

# What the decoder calls; a kernel built from older sources (an editable install not rebuilt
# since) lacks some of them, and is not used rather than failing mid-read.
FUNCTIONS: Final = ("chain", "crc_ok", "records", "scalars", "by_tag", "split", "tiles", "stats",
                    "hparams_event")  # fmt: skip
HOW_TO_GET: Final = ("install distmon's wheel, or reinstall from source where a C compiler "
                     "and Python's headers are found")  # fmt: skip


def _why_not() -> str | None:
    """Why the kernel is not used, and how to have it (None: it is)."""
    if os.environ.get("DISTMON_PURE", "") not in ("", "0"):
        return "DISTMON_PURE is set; unset it for the C kernel"
    try:  # by name: type checkers need not find a module that may not be built
        module = importlib.import_module("distcore.tfrecord._kernel")
    except ImportError:
        return f"no compiled kernel; {HOW_TO_GET}"
    missing = [name for name in FUNCTIONS if not hasattr(module, name)]
    return f"the compiled kernel is out of date; {HOW_TO_GET}" if missing else None


def _load() -> ModuleType | None:
    if _why_not() is not None:
        return None
    return importlib.import_module("distcore.tfrecord._kernel")


ACTIVE: ModuleType | None = _load()  # read by this module alone (tests set it to switch)


def describe() -> str:
    """The decoder in use, in one line: "C kernel", or the fallback with why and what to do."""
    if ACTIVE is not None:
        return "C kernel"
    return f"pure Python (fallback: {_why_not() or 'the C kernel is turned off'})"


def fallback_note() -> str | None:
    """What a front end says, once, where the reference path runs (None on the C kernel)."""
    return None if ACTIVE is not None else "decoder: " + describe()


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
    import numpy as np

    import distcore.tfrecord.reference as pure
    from distcore.tfrecord.batch import decode_frames
    from distcore.tfrecord.framing import PADDING, frame

    size = len(data) if size is None else size
    if isinstance(data, bytearray) and len(data) >= size + PADDING:
        raw = data
    else:
        raw = bytearray(size + PADDING)
        raw[:size] = data[:size]
    buf = np.frombuffer(raw, dtype=np.uint8)
    compiled = None if reference else ACTIVE
    frames = frame(raw, buf, size, compiled)
    if frames.end == 0:
        return None, 0
    if compiled is None:
        found = pure.decode_records(raw, frames, plugins)
    else:
        found = decode_frames(raw, buf, frames, plugins, compiled)
    if base_offset:
        found.problems = [(kind, off + base_offset) for kind, off in found.problems]
    return found, frames.end


def decode_files(
    raw: bytearray,
    size: int,
    groups: Sequence[Sequence[Span]],
    plugins: Callable[[int], dict[str, str]],
) -> list[list[Batch | None] | None]:
    """Decode raw[:size] (padded past `size`), which holds `groups` of files back to back: for
    each group (the files of one run) each file's batch as a lone read of it would give it,
    or None where the caller is to read the group's files one by one (many.py says when)."""
    if ACTIVE is None:
        from distcore.tfrecord.reference import decode_files as one_by_one

        return one_by_one(raw, groups, plugins)
    from distcore.tfrecord.many import decode_files as together

    return together(raw, size, groups, plugins, ACTIVE)


def first_stats(steps: I64, values: F64) -> tuple[bool, float, float] | None:
    """(steps strictly increase, fmin of values, fmax of values) in one kernel call; None on
    the reference path, or where the kernel's answer may not be numpy's (zeros, NaN): there
    the caller asks numpy."""
    if ACTIVE is None:
        return None
    import numpy as np

    increasing, low, high = ACTIVE.stats(
        np.ascontiguousarray(steps, np.int64), np.ascontiguousarray(values, np.float64)
    )
    if low == 0 or low != low or high == 0 or high != high:
        return None
    return bool(increasing), float(low), float(high)
