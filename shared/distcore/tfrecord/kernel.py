"""The compiled kernel (_kernel*.c, listed in _kernel.c), when it was built and is not turned off.

`ACTIVE` is the extension module, or None: then framing, CRC and the fast path run on numpy.
DISTMON_PURE=1 in the environment forces the numpy path (tests run both and compare them);
`pip install -e .` builds the kernel with the system's C compiler where one is found, and
installs without it where not (setup.py marks it optional).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

# What the decoder calls; a kernel built from older sources (an editable install not rebuilt
# since) lacks some of them, and is not used rather than failing mid-read.
FUNCTIONS = ("chain", "crc_ok", "records", "scalars", "fields", "by_tag", "split", "tiles",
             "stats", "hparams_event")  # fmt: skip


def _load() -> ModuleType | None:
    if os.environ.get("DISTMON_PURE", "") not in ("", "0"):
        return None
    try:  # by name: type checkers need not find a module that may not be built
        module = importlib.import_module("distcore.tfrecord._kernel")
    except ImportError:
        return None
    return module if all(hasattr(module, name) for name in FUNCTIONS) else None


ACTIVE: ModuleType | None = _load()
