"""Run discovery: every directory holding a `*tfevents*` file is a run (TensorBoard's rule).

discover() walks strings, not Paths (discovery was most of the way to a sweep's first
row). `_pathlib_discover` below is the walk it replaced, kept as the oracle: on every tree here,
real directories, links, loops, FIFOs and odd names, both give the same runs (names, absolute
directories, files in order) and the same problems, in the same order.
"""

from __future__ import annotations

import os
import string
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcore.events.discovery import EVENT_MARKER, RunDir, discover, root_prefixes

EVENTS = "events.out.tfevents.1700000000.host.1.0"


def _pathlib_walk(root: Path, problems: list[str]) -> Iterator[tuple[Path, list[Path]]]:
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


def _pathlib_discover(roots: Sequence[Path], problems: list[str]) -> dict[str, RunDir]:
    runs: dict[str, RunDir] = {}
    for prefix, root in zip(root_prefixes(roots), roots, strict=True):
        for directory, files in _pathlib_walk(root, problems):
            if files:
                rel = directory.relative_to(root).as_posix()
                name = rel if not prefix else prefix if rel == "." else f"{prefix}/{rel}"
                runs[name] = RunDir(name, directory.absolute(), tuple(files))
    return runs


def _events(directory: Path, name: str = EVENTS) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(b"")


def _nested(t: Path) -> None:
    _events(t)
    _events(t / "exp1" / "train")
    _events(t / "exp1" / "train", "events.out.tfevents.1600000000.host.1.0")  # sorts first
    _events(t / "exp1" / "validation")
    (t / "notes").mkdir()
    (t / "notes" / "readme.txt").write_text("not a run")


def _links(t: Path) -> None:
    _events(t / "real")
    _events(t / "outside-target")
    (t / "inside").mkdir()
    (t / "inside" / "up").symlink_to(t)  # a loop: walked once
    (t / "inside" / "again").symlink_to(t / "real")  # the same real directory: once
    (t / "linked-file").mkdir()
    (t / "linked-file" / EVENTS).symlink_to(t / "real" / EVENTS)  # a linked file counts
    (t / "broken").mkdir()
    (t / "broken" / EVENTS).symlink_to(t / "nowhere")  # a problem, not a run
    (t / "dangling-dir").symlink_to(t / "gone")  # neither a run nor a problem
    (t / "self").symlink_to(t / "self")  # ELOOP: a problem


def _specials(t: Path) -> None:
    (t / "fifo").mkdir()
    os.mkfifo(t / "fifo" / EVENTS)  # never opened: a problem
    _events(t / "x.tfevents.dir")  # a directory named like an event file is walked
    _events(t / "plain-file-run", "my.tfevents")  # any name holding the marker


def _odd_names(t: Path) -> None:
    for name in (os.fsdecode(b"r\xff"), "r\\xff", "new\nline", " space ", "-dash", "é", "a:b"):
        _events(t / name / "sub")
    _events(t / "back\\slash", f"{EVENTS}\n")


TREES: dict[str, Callable[[Path], None]] = {
    "nested": _nested, "links": _links, "specials": _specials, "odd-names": _odd_names,
}  # fmt: skip


def _same(roots: Sequence[Path]) -> tuple[dict[str, RunDir], list[str]]:
    got: list[str] = []
    want: list[str] = []
    runs = discover(roots, got)
    assert runs == _pathlib_discover(roots, want)
    assert list(runs) == list(_pathlib_discover(roots, []))  # the same order too
    assert got == want
    return runs, got


@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize(
    "spelling", ["absolute", ".", "./logs", "logs/", "sub/../logs", "link", "link/"]
)
def test_the_same_runs_and_problems_as_the_pathlib_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tree: str, spelling: str
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to(logs)  # a root that is a link: its runs named below it
    TREES[tree](logs)
    monkeypatch.chdir(logs if spelling == "." else tmp_path)
    root = logs if spelling == "absolute" else Path(spelling)
    runs, _ = _same([root])
    assert all(run.path.is_absolute() and run.path.is_dir() for run in runs.values())
    assert all(f.is_file() for run in runs.values() for f in run.files)


@pytest.mark.parametrize(
    ("tree", "names"),
    [
        ("nested", {".": 1, "exp1/train": 2, "exp1/validation": 1}),
        ("links", {"real": 1, "outside-target": 1, "linked-file": 1}),
        ("specials", {"x.tfevents.dir": 1, "plain-file-run": 1}),
    ],
)
def test_runs_found(tmp_path: Path, tree: str, names: dict[str, int]) -> None:
    TREES[tree](tmp_path)
    runs, problems = _same([tmp_path])
    # "real" and its link "inside/again" are one directory: read once, by the name met first
    # (scandir's order decides, as in TensorBoard's walk)
    found = {"real" if n == "inside/again" else n: len(run.files) for n, run in runs.items()}
    assert found == names
    if tree == "links":
        assert sorted(p.split(": ")[0] for p in problems) == [
            f"{tmp_path}/broken/{EVENTS}", f"{tmp_path}/self",
        ]  # fmt: skip
    if tree == "specials":
        assert problems == [f"{tmp_path}/fifo/{EVENTS}: not a regular file (or a broken link)"]


def test_files_sorted_by_name_and_paths_as_given(tmp_path: Path) -> None:
    _nested(tmp_path)
    runs, _ = _same([tmp_path])
    train = runs["exp1/train"]
    assert train.path == tmp_path / "exp1" / "train"
    assert [f.name for f in train.files] == sorted(f.name for f in train.files)
    assert train.files[0] == tmp_path / "exp1" / "train" / "events.out.tfevents.1600000000.host.1.0"


@pytest.mark.parametrize(
    ("roots", "names"),
    [
        (["a/logs", "b/logs"], {"logs/run", "logs-2/run"}),
        (["a/logs", "b/logs", "a/logs/run"], {"logs/run", "logs-2/run", "run"}),
        (["a/logs/run"], {"."}),
    ],
)
def test_several_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, roots: list[str], names: set[str]
) -> None:
    _events(tmp_path / "a" / "logs" / "run")
    _events(tmp_path / "b" / "logs" / "run")
    monkeypatch.chdir(tmp_path)
    runs, _ = _same([Path(r) for r in roots])
    assert set(runs) == names


@pytest.mark.parametrize("make", ["missing", "a-file"])
def test_a_root_that_cannot_be_listed_is_a_problem(tmp_path: Path, make: str) -> None:
    root = tmp_path / "root"
    if make == "a-file":
        root.write_text("")
    runs, problems = _same([root])
    assert runs == {}
    assert [p.split(": ")[:2] for p in problems] == [[str(root), "cannot list"]]


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists whatever the permissions say")
def test_an_unreadable_directory_is_a_problem(tmp_path: Path) -> None:
    _events(tmp_path / "open")
    (tmp_path / "closed").mkdir()
    (tmp_path / "closed").chmod(0)
    try:
        runs, problems = _same([tmp_path])
    finally:
        (tmp_path / "closed").chmod(0o755)
    assert set(runs) == {"open"}
    assert [p.split(": ")[:2] for p in problems] == [[f"{tmp_path}/closed", "cannot list"]]


# Trees as a writer could make them: nested names from an alphabet with the odd characters
# (a backslash, a newline, non-UTF-8 bytes, the marker itself), some holding an event file.
_NAME = st.text(string.ascii_lowercase[:3] + "\\\n .é" + os.fsdecode(b"\xff"), min_size=1,
                max_size=4).filter(lambda n: n not in (".", "..")) | st.just("x.tfevents")
_TREE = st.lists(st.tuples(st.lists(_NAME, min_size=1, max_size=3), st.booleans()), max_size=8)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_TREE)
def test_generated_trees(tmp_path_factory: pytest.TempPathFactory,
                         tree: list[tuple[list[str], bool]]) -> None:
    root = tmp_path_factory.mktemp("tree")
    for parts, has_events in tree:
        directory = root.joinpath(*parts)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):  # a file of that name is in the way
            continue
        if has_events:
            _events(directory)
    runs, problems = _same([root])
    assert problems == []
    want = {(p.parent.relative_to(root).as_posix()) for p in root.rglob(f"*{EVENT_MARKER}*")
            if p.is_file()}
    assert set(runs) == want
