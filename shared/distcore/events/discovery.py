"""Run discovery as TensorBoard does it: every directory holding a `*tfevents*` file is a run."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from distcore.names import RUN_JSON

EVENT_MARKER = "tfevents"
TELL_EVERY = 256  # directories between a long walk's `told` calls


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


class Found(NamedTuple):
    """A run as the walk found it, in strings: its RunDir is made when asked for. A first read
    of a sweep reads its newest runs before it makes the other runs' Paths. A tuple: made once
    a run by a sweep's walk, where a frozen dataclass's __init__ (object.__setattr__ per field)
    was a measurable share of it (docs/benchmarks.md)."""

    name: str
    directory: str  # as the walk spelled it
    names: tuple[str, ...]  # its event files' names, sorted
    mtime: float  # the newest event file's mtime (0.0: unknown, or not asked for)
    cwd: str  # what a relative directory is below

    def run(self) -> RunDir:
        # A child of a Path parses only its name; the files keep the root's spelling
        base = Path(self.directory)
        return RunDir(
            self.name,
            base if base.is_absolute() else Path(self.cwd, self.directory),
            tuple(base / n for n in self.names),
        )


# Told the runs a walk found so far, now and then; True: it need not be told again.
Told = Callable[[Mapping[str, "Found"]], bool]


def _walk(
    root: Path, prefix: str, cwd: str, runs: dict[str, Found], problems: list[str], mtimes: bool,
    agent: list[str] | None = None, told: Told | None = None,
) -> Told | None:
    """Add every run below root to `runs` (under `prefix`); symlinks followed, each real
    directory once. What cannot be listed, and event-file names that are not regular files, go
    to `problems`.

    Strings, not Paths: a sweep's 10,000 runs made 30,000 Path objects here (parsing each
    took most of discovery's time, which is on the way to the dashboard's first row); the
    walk keeps the strings that Path would print (the root's own spelling, then "/" and
    the names scandir gives), and the caller makes Paths only of runs' directories and files.
    With `mtimes`, each run's newest event-file mtime (0.0: none could be stat'ed), from the
    DirEntry: no Path, no second lookup of the name. One loop, no generator, no helper calls
    per directory: a sweep's walk is 10,000 turns of it on the way to the first row.
    `agent`: where given, the directories that list a run.json are added to it. `told`: called
    every TELL_EVERY directories with the runs found so far (a long walk's first runs are
    read and shown before it goes on), until it returns True; what is left of it is returned.
    """
    seen: set[tuple[int, int]] = set()
    stack = [(str(root), ".")]
    stat, scandir = os.stat, os.scandir
    count = 0
    while stack:
        directory, rel = stack.pop()
        count += 1
        if told is not None and not count % TELL_EVERY and told(runs):
            told = None
        try:
            st = stat(directory)
            key = (st.st_dev, st.st_ino)
            if key in seen:
                continue
            seen.add(key)
            with scandir(directory) as listing:
                entries = list(listing)
        except OSError as err:
            problems.append(f"{directory}: cannot list: {err.strerror or err}")
            continue
        files = []
        newest = 0.0
        for entry in entries:
            name = entry.name
            try:
                if entry.is_dir():  # DirEntry's type: no system call unless it is a link
                    # "./a" is "a" as a Path: the walk's strings stay what its Paths printed
                    path = name if directory == "." else entry.path
                    stack.append((path, name if rel == "." else f"{rel}/{name}"))
                elif EVENT_MARKER in name:
                    if entry.is_file():
                        files.append(name)
                        if mtimes:
                            try:
                                mtime = entry.stat().st_mtime  # followed, as os.stat(path) is
                            except OSError:  # gone since the listing: its read says so
                                mtime = 0.0
                            if mtime > newest:
                                newest = mtime
                    else:
                        problems.append(f"{entry.path}: not a regular file (or a broken link)")
                elif name == RUN_JSON and agent is not None:
                    agent.append(directory)
            except OSError as err:
                problems.append(f"{entry.path}: {err.strerror or err}")
        if files:
            files.sort()  # by name: what sorting their Paths gave (one directory, names compared)
            run = _prefixed(prefix, rel) if prefix else rel
            runs[run] = Found(run, directory, tuple(files), newest, cwd)
    return told


# The walk runs where the first read does, after Textual loaded. Begun on a thread beside
# Textual's import it gained nothing (its system calls each take the GIL back from the import's
# Python), and in a child forked before Textual loaded the first row came later (the figures:
# docs/benchmarks.md, "Measured choices").
def walk_runs(
    roots: Sequence[Path], problems: list[str] | None = None, *, mtimes: bool = False,
    agent: list[str] | None = None, told: Told | None = None,
) -> list[Found]:
    """Every run under the roots, in discover()'s order, unmade; with `mtimes`, each one's
    newest event file's mtime (one stat a file). What could not be looked at is added to
    `problems`; the directories (as the walk spelled them) that list a run.json to `agent`;
    `told`: see _walk."""
    found: list[str] = []
    runs: dict[str, Found] = {}
    cwd = os.getcwd()  # what Path.absolute() prefixes
    for prefix, root in zip(root_prefixes(roots), roots, strict=True):
        told = _walk(root, prefix, cwd, runs, found, mtimes, agent, told)
    if problems is not None:
        problems.extend(found)
    return list(runs.values())


def discover(roots: Sequence[Path], problems: list[str] | None = None) -> dict[str, RunDir]:
    """Every run under the roots; what could not be looked at is added to `problems`."""
    return {found.name: found.run() for found in walk_runs(roots, problems)}
