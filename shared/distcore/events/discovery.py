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
    return _prefixed(prefix, directory.relative_to(root).as_posix())


def _prefixed(prefix: str, rel: str) -> str:
    if not prefix:
        return rel
    return prefix if rel == "." else f"{prefix}/{rel}"


def _walk(root: Path, problems: list[str]) -> Iterator[tuple[str, str, list[str]]]:
    """(directory, its name relative to root, its event files' names, sorted) below root;
    symlinks followed, each real directory once. What cannot be listed, and event-file names
    that are not regular files, go to `problems`.

    Strings, not Paths: a sweep's 10,000 runs made 30,000 Path objects here (parsing each
    took most of discovery's time, which is on the way to the dashboard's first row); the
    walk yields the strings that Path would print (the root's own spelling, then "/" and
    the names scandir gives), and the caller makes Paths only of runs' directories and files.
    """
    seen: set[tuple[int, int]] = set()
    stack = [(str(root), ".")]
    while stack:
        directory, rel = stack.pop()
        try:
            st = os.stat(directory)
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError as err:
            problems.append(f"{directory}: cannot list: {err.strerror or err}")
            continue
        files = []
        for entry in entries:
            try:
                if entry.is_dir():  # DirEntry's type: no system call unless it is a link
                    # "./a" is "a" as a Path: the walk's strings stay what its Paths printed
                    path = entry.name if directory == "." else entry.path
                    stack.append((path, entry.name if rel == "." else f"{rel}/{entry.name}"))
                elif EVENT_MARKER in entry.name:
                    if entry.is_file():
                        files.append(entry.name)
                    else:
                        problems.append(f"{entry.path}: not a regular file (or a broken link)")
            except OSError as err:
                problems.append(f"{entry.path}: {err.strerror or err}")
        files.sort()  # by name: what sorting their Paths gave (one directory, names compared)
        yield directory, rel, files


def discover(roots: Sequence[Path], problems: list[str] | None = None) -> dict[str, RunDir]:
    """Every run under the roots; what could not be looked at is added to `problems`."""
    found: list[str] = []
    runs: dict[str, RunDir] = {}
    cwd = os.getcwd()  # what Path.absolute() prefixes
    for prefix, root in zip(root_prefixes(roots), roots, strict=True):
        for directory, rel, names in _walk(root, found):
            if names:
                # A child of a Path parses only its name; the files keep the root's spelling
                base = Path(directory)
                run = RunDir(
                    _prefixed(prefix, rel),
                    base if base.is_absolute() else Path(cwd, directory),
                    tuple(base / n for n in names),
                )
                runs[run.name] = run
    if problems is not None:
        problems.extend(found)
    return runs
