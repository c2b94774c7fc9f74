"""Where a run keeps its profiles: `<run>/plugins/profile/<timestamp>/<host>.xplane.pb`, as
`tf.profiler.experimental.start(logdir)` writes them, or one folder down, as Keras'
TensorBoard callback does (`<log_dir>/train/plugins/profile/...`)."""

from __future__ import annotations

import os
from pathlib import Path

SUFFIX = ".xplane.pb"


def _profiles_under(plugin: Path) -> list[Path]:
    found: list[Path] = []
    try:
        sessions = sorted(p for p in plugin.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []
    for session in sessions:
        try:
            names = sorted(os.listdir(session))
        except OSError:
            continue
        found.extend(session / n for n in names if n.endswith(SUFFIX) and (session / n).is_file())
    return found


def find_profiles(run_dir: str | os.PathLike[str]) -> list[Path]:
    """The run's `*.xplane.pb` files, oldest session first (sessions are named by time)."""
    root = Path(run_dir)
    found = _profiles_under(root / "plugins" / "profile")
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        children = []
    for child in children:
        found.extend(_profiles_under(child / "plugins" / "profile"))
    return sorted(found, key=lambda p: (p.parent.name, str(p)))
