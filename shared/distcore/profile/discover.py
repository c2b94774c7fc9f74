"""Where a run keeps its profiles: `<run>/plugins/profile/<timestamp>/<host>.xplane.pb`, as
`tf.profiler.experimental.start(logdir)` writes them, or one folder down, as Keras'
TensorBoard callback does (`<log_dir>/train/plugins/profile/...`).

One `scandir` per folder and the entries' own types (no `stat` per child): distmon looks in
every job of a sweep, most of which have no profile at all.
"""

from __future__ import annotations

import os
from pathlib import Path

SUFFIX = ".xplane.pb"


def _folders(path: str) -> list[os.DirEntry[str]]:
    """The folders in `path` (links not followed), or none where it cannot be listed."""
    try:
        with os.scandir(path) as entries:
            return [e for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _profiles_under(plugin: str) -> list[Path]:
    found: list[Path] = []
    for session in sorted(_folders(plugin), key=lambda e: e.name):
        try:
            with os.scandir(session.path) as entries:
                names = sorted(e.name for e in entries if e.name.endswith(SUFFIX) and e.is_file())
        except OSError:
            continue
        found.extend(Path(session.path) / n for n in names)
    return found


def profiles_at(directory: str | os.PathLike[str]) -> list[Path]:
    """The `*.xplane.pb` files in `<directory>/plugins/profile/` alone (none of its children's),
    oldest session first."""
    return _profiles_under(os.path.join(os.fspath(directory), "plugins", "profile"))


def find_profiles(run_dir: str | os.PathLike[str]) -> list[Path]:
    """The run's `*.xplane.pb` files, oldest session first (sessions are named by time)."""
    root = os.fspath(run_dir)
    found = _profiles_under(os.path.join(root, "plugins", "profile"))
    for child in sorted(_folders(root), key=lambda e: e.name):
        found.extend(_profiles_under(os.path.join(child.path, "plugins", "profile")))
    return sorted(found, key=lambda p: (p.parent.name, str(p)))
