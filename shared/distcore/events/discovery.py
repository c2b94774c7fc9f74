"""Run discovery as TensorBoard does it: every directory holding a `*tfevents*` file is a run."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

EVENT_MARKER = "tfevents"


@dataclass(frozen=True)
class RunDir:
    name: str
    path: Path
    files: tuple[Path, ...]  # sorted by name, i.e. by creation time for TF's names


def root_prefixes(roots: Sequence[Path]) -> list[str]:
    """'' for a single root; else each root's folder name, made unique."""
    if len(roots) <= 1:
        return [""] * len(roots)
    prefixes: list[str] = []
    for root in roots:
        base = root.absolute().name or str(root.absolute())
        name, n = base, 2
        while name in prefixes:
            name, n = f"{base}-{n}", n + 1
        prefixes.append(name)
    return prefixes


def run_name(prefix: str, root: Path, directory: Path) -> str:
    rel = directory.relative_to(root).as_posix()
    if not prefix:
        return rel
    return prefix if rel == "." else f"{prefix}/{rel}"


def _walk(root: Path, problems: list[str]) -> Iterator[tuple[Path, list[Path]]]:
    """(directory, event files) below root; symlinks followed, each real directory once.
    What cannot be listed, and event-file names that are not regular files, go to `problems`."""
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            st = directory.stat()
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            entries = list(os.scandir(directory))
        except OSError as err:
            problems.append(f"{directory}: cannot list: {err.strerror or err}")
            continue
        files = []
        for entry in entries:
            try:
                if entry.is_dir():
                    stack.append(Path(entry.path))
                elif EVENT_MARKER in entry.name:
                    if entry.is_file():
                        files.append(Path(entry.path))
                    else:
                        problems.append(f"{entry.path}: not a regular file (or a broken link)")
            except OSError as err:
                problems.append(f"{entry.path}: {err.strerror or err}")
        yield directory, sorted(files)


def discover(roots: Sequence[Path], problems: list[str] | None = None) -> dict[str, RunDir]:
    """Every run under the roots; what could not be looked at is added to `problems`."""
    found: list[str] = []
    runs: dict[str, RunDir] = {}
    for prefix, root in zip(root_prefixes(roots), roots, strict=True):
        for directory, files in _walk(root, found):
            if files:
                name = run_name(prefix, root, directory)
                runs[name] = RunDir(name, directory.absolute(), tuple(files))
    if problems is not None:
        problems.extend(found)
    return runs
