"""Run distmon as a user's install runs it: from byte-code caches.

A developer's shell here sets PYTHONDONTWRITEBYTECODE=1, so a distmon started from it compiles
the project's ~100 modules from source on every start (0.3-0.5 s of CPU), which an installed
distmon never does (pip writes the caches). The benchmarks start every measured distmon with
`user_env()` and call `warm_caches()` once before their first measured round.

A helper the benchmarks import, not a benchmark: `make bench` runs bench/[!_]*.py, so its
leading underscore keeps it from being run as a script that does nothing.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

PACKAGES = ("distcore", "distmon")  # what a distmon start imports from this project


def user_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this environment) with byte-code caches read and written."""
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


UNSET = "env -u PYTHONDONTWRITEBYTECODE"  # the same, as a prefix to a shell command


def warm_caches() -> None:
    """Compile the project's packages, as found on this interpreter's path (the checkout the
    benchmark's children import), once: untimed, like pip's install step."""
    dirs = []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)  # a top-level package: found, not imported
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(spec.submodule_search_locations)
    if dirs:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", *dirs],
            env=user_env(),
            stdout=subprocess.DEVNULL,
            check=False,
        )
