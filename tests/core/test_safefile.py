"""The one writer of files others can reach (`distcore.safefile`): `open_write` writes a regular
file with one name and refuses, without blocking, a link (dangling or not), a FIFO (read or
not), a device, a directory or a hard link; `atomic_file`/`write_atomic` replace whatever is
under the name (a link, a FIFO) with a new file and leave nothing behind when they fail."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcore.safefile import UnsafeFile, WriteHow, atomic_file, open_write, write_atomic

SECRET = b"someone else's file\n"


def write_fd(fd: int, data: bytes) -> None:
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def planted_link(where: Path) -> Path:
    (where.parent / "secret").write_bytes(SECRET)
    where.symlink_to(where.parent / "secret")
    return where


def planted_dangling(where: Path) -> Path:
    where.symlink_to(where.parent / "created-through-the-link")
    return where


def planted_fifo(where: Path) -> Path:
    os.mkfifo(where, 0o600)
    return where


def planted_directory(where: Path) -> Path:
    where.mkdir()
    return where


def planted_hard_link(where: Path) -> Path:
    (where.parent / "secret").write_bytes(SECRET)
    os.link(where.parent / "secret", where)
    return where


def device(where: Path) -> Path:
    return Path(os.devnull)  # opened for writing, never truncated: harmless to refuse


@pytest.mark.parametrize(
    ("plant", "why"),
    [
        (planted_link, "symbolic link"),
        (planted_dangling, "symbolic link"),
        (planted_fifo, "FIFO"),
        (planted_directory, "Is a directory"),
        (planted_hard_link, "hard link"),
        (device, "character device"),
    ],
)
@pytest.mark.parametrize("how", ["truncate", "append", "keep"])
def test_open_write_refuses_what_is_not_a_plain_file(
    tmp_path: Path, plant: Callable[[Path], Path], why: str, how: WriteHow
) -> None:
    target = plant(tmp_path / "stacks-worker-0.txt")
    after_plant = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(OSError, match=why):
        open_write(target, how=how)
    assert sorted(p.name for p in tmp_path.iterdir()) == after_plant  # nothing created
    if (tmp_path / "secret").exists():
        assert (tmp_path / "secret").read_bytes() == SECRET


def test_a_fifo_with_a_reader_is_refused_too(tmp_path: Path) -> None:
    fifo = planted_fifo(tmp_path / "output.log")
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(UnsafeFile, match="FIFO"):
            open_write(fifo, how="append")
        assert os.read(reader, 100) == b""  # nothing was written into it
    finally:
        os.close(reader)


def test_a_fifo_never_blocks_the_caller(tmp_path: Path) -> None:
    fifo = planted_fifo(tmp_path / "stacks-worker-0.txt")
    outcome: list[BaseException | int] = []

    def attempt() -> None:
        try:
            outcome.append(open_write(fifo))
        except OSError as err:
            outcome.append(err)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout=60)
    if thread.is_alive():  # blocked in open(): a reader lets it go, and the test fails
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        thread.join(timeout=10)
        pytest.fail("open_write blocked on a FIFO")
    assert isinstance(outcome[0], UnsafeFile)


@pytest.mark.parametrize(
    ("how", "before", "expected"),
    [
        ("truncate", None, b"new"),
        ("truncate", b"old content", b"new"),
        ("append", b"old ", b"old new"),
        ("keep", b"old content", b"new content"),  # written at 0, the rest kept
    ],
)
def test_open_write_writes_a_regular_file(
    tmp_path: Path, how: WriteHow, before: bytes | None, expected: bytes
) -> None:
    target = tmp_path / "output.log"
    if before is not None:
        target.write_bytes(before)
    fd = open_write(target, how=how)
    assert os.get_blocking(fd)  # O_NONBLOCK cleared once it is known to be a file
    write_fd(fd, b"new")
    assert target.read_bytes() == expected


@pytest.mark.parametrize("plant", [planted_link, planted_dangling, planted_fifo, None])
def test_write_atomic_replaces_whatever_is_under_the_name(
    tmp_path: Path, plant: Callable[[Path], Path] | None
) -> None:
    target = tmp_path / "run.json"
    if plant is None:
        target.write_bytes(b"old")
    else:
        plant(target)
    write_atomic(target, b"new", mode=0o644)
    assert not target.is_symlink() and stat.S_ISREG(target.lstat().st_mode)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    if (tmp_path / "secret").exists():
        assert (tmp_path / "secret").read_bytes() == SECRET
    assert not (tmp_path / "created-through-the-link").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) in (["run.json"], ["run.json", "secret"])


def test_a_failed_atomic_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "config.resolved.toml"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_file(target) as out:
        out.write(b"half")
        raise RuntimeError("the disk is full")
    assert target.read_bytes() == b"old" and list(tmp_path.iterdir()) == [target]


def test_a_directory_under_the_name_is_not_replaced(tmp_path: Path) -> None:
    planted_directory(tmp_path / "run.json")
    with pytest.raises(OSError):
        write_atomic(tmp_path / "run.json", b"new")
    assert list(tmp_path.iterdir()) == [tmp_path / "run.json"]


NAMES = st.text(
    st.characters(codec="utf-8", exclude_characters="/\0"), min_size=1, max_size=60
).filter(lambda n: n not in (".", "..") and len(os.fsencode(n)) <= 255)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES, data=st.binary(max_size=64))
def test_any_name_is_written_whole_and_alone(tmp_path: Path, name: str, data: bytes) -> None:
    where = tmp_path / "d"
    where.mkdir(exist_ok=True)
    for old in where.iterdir():
        old.unlink()
    write_atomic(where / name, data)
    assert (where / name).read_bytes() == data
    write_fd(open_write(where / name, how="append"), data)
    assert [p.name for p in where.iterdir()] == [name]
    assert (where / name).read_bytes() == data * 2
