"""The compiled kernel (_kernel.c), when it was built and is not turned off.

`ACTIVE` is the extension module, or None: then framing, CRC and the fast path run on numpy.
DISTMON_PURE=1 in the environment forces the numpy path (tests run both and compare them);
`pip install -e .` builds the kernel with the system's C compiler where one is found, and
installs without it where not (setup.py marks it optional).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def _load() -> ModuleType | None:
    if os.environ.get("DISTMON_PURE", "") not in ("", "0"):
        return None
    try:  # by name: type checkers need not find a module that may not be built
        return importlib.import_module("distcore.tfrecord._kernel")
    except ImportError:
        return None


ACTIVE: ModuleType | None = _load()
