"""Which decoder runs: the compiled kernel (_kernel*.c, listed in _kernel.c), or, where it was
not built or is turned off, the reference path in plain Python (same results, more CPU).

`ACTIVE` is the extension module, or None. It is read in one place, the dispatch
(chunk.py), which hands it down to the fast path; the per-record decoder never looks at it.
DISTMON_PURE=1 in the environment forces the reference path (tests run both and compare
them). A wheel carries the kernel; `pip install` from source builds it with the system's C
compiler and Python's headers where both are found, and installs without it where not
(setup.py marks it optional).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Final

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


ACTIVE: ModuleType | None = _load()


def describe() -> str:
    """The decoder in use, in one line: "C kernel", or the fallback with why and what to do."""
    if ACTIVE is not None:
        return "C kernel"
    return f"pure Python (fallback: {_why_not() or 'the C kernel is turned off'})"


def fallback_note() -> str | None:
    """What a front end says, once, where the reference path runs (None on the C kernel)."""
    return None if ACTIVE is not None else "decoder: " + describe()
