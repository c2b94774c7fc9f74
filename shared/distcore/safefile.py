"""Files from outside, read safely; private files, written safely.

Reading: anyone who can write a logdir can put a FIFO, a device, a directory, a symlink or a
16 GiB file where run.json (or a config) should be. `read_regular` opens without blocking
(O_NONBLOCK: a FIFO with no writer would hang `open` itself), refuses anything but a regular
file from the open descriptor (fstat, so the check and the read are of the same file), follows
no link where `follow=False`, and reads at most `max_bytes`. `load_json` adds a bound on nesting:
every consumer of a parsed document may recurse over it (escaping, rendering), and Python's
recursion limit is a traceback, not an error message.

Writing: every file distagent and distmon write in a run directory, a logdir or a path a user
chose goes through this module, since anyone who can write that directory may have planted a
link (the write would land in a file of theirs, or of ours elsewhere) or a FIFO (`open` would
block the thread that keeps the job alive, or stops it) under the name first. `open_write` opens
with O_NOFOLLOW|O_NONBLOCK, refuses anything but a regular file with one name from the open
descriptor, and only then truncates and clears O_NONBLOCK. `atomic_file`/`write_atomic` write a
new temporary file beside the target (O_EXCL: never an existing file or a link) and `os.replace`
it, so a reader sees the old file or the new one, and whatever was planted under the name is
replaced, never written through. Crash logs hold tracebacks and paths, and their fallback
directory is in a shared `/tmp` where another user may have planted a directory or a symlink
first: `private_dir` opens (creating) a directory that must be ours, a real directory (no link
followed), owned by this user, writable by no one else (created 0700); `write_private` creates a
new file in it, 0600, with O_EXCL|O_NOFOLLOW relative to that directory's descriptor, so nothing
swapped in between the check and the write is followed.

Hand-written (no library): it is a few system calls, and the standard library has each one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final, Literal

MAX_JSON_DEPTH: Final = 64  # run.json is a config, a plan and metrics: 5 levels in practice
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_NOCTTY: Final = getattr(os, "O_NOCTTY", 0)
_DIRECTORY: Final = getattr(os, "O_DIRECTORY", 0)
WriteHow = Literal["truncate", "append", "keep"]


class UnsafeFile(OSError):
    """A path that is not a regular file, too big, a link where none is followed, or (for
    private directories) not ours. An OSError: callers that treat unreadable files as absent
    keep doing so."""


class TooDeep(ValueError):
    """JSON nested deeper than the reader allows."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: str | os.PathLike[str], max_bytes: int, *, follow: bool = True) -> bytes:
    """The whole of a regular file of at most `max_bytes`, else UnsafeFile (or another
    OSError: missing, permission denied, ELOOP for a link with `follow=False`)."""
    flags = os.O_RDONLY | _NONBLOCK | _CLOEXEC | _NOCTTY | (0 if follow else _NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.ELOOP and not follow:
            raise UnsafeFile(errno.ELOOP, "a symbolic link (not followed)", str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafeFile(errno.EINVAL, f"{_kind(mode)}, not a regular file", str(path))
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise UnsafeFile(errno.EFBIG, f"larger than {max_bytes} bytes", str(path))
    return data


def json_depth(value: Any, limit: int) -> int:
    """How deep lists and objects nest in `value` (a scalar is 0), counted without recursion and
    stopping once past `limit`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            if depth > limit:
                return depth
            stack.extend((v, depth) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def parse_json(data: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A JSON document, or ValueError (bad JSON; TooDeep: nested deeper than `max_depth`)."""
    try:
        doc = json.loads(data)
    except RecursionError:
        raise TooDeep(f"nested deeper than {max_depth} levels") from None
    if json_depth(doc, max_depth) > max_depth:
        raise TooDeep(f"nested deeper than {max_depth} levels")
    return doc


def load_json(
    path: str | os.PathLike[str], max_bytes: int, *, max_depth: int = MAX_JSON_DEPTH,
    follow: bool = False,
) -> Any:
    """`read_regular` then `parse_json`: OSError for the file, ValueError for its content."""
    return parse_json(read_regular(path, max_bytes, follow=follow), max_depth)


def private_dir(path: Path) -> int:
    """A descriptor of directory `path`, created 0700 if missing (its parents too), when it is a
    real directory owned by this user that no one else may write; else UnsafeFile. Close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    try:
        fd = os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeFile(err.errno, "a link or not a directory (not followed)",
                             str(path)) from None
        raise
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISDIR(st.st_mode):
        problem = "not a directory"
    elif st.st_uid != os.getuid():
        problem = f"owned by uid {st.st_uid}, not this user"
    elif st.st_mode & 0o022:
        problem = f"writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    if problem is not None:
        os.close(fd)
        raise UnsafeFile(errno.EPERM, problem, str(path))
    return fd


def write_private(directory: Path, name: str, data: bytes) -> Path:
    """A new file `name` (never an existing one, never through a link) holding `data`, mode
    0600, in the private directory `directory` (see `private_dir`). Its path."""
    dir_fd = private_dir(directory)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600,
                     dir_fd=dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)
    return directory / name


def open_write(path: Path, *, how: WriteHow = "truncate", mode: int = 0o644) -> int:
    """A blocking descriptor writing the regular file `path` (created with `mode`, less the
    umask, if missing): `how` "truncate" empties it, "append" adds at its end, "keep" leaves
    its content (pwrite). Never through a link, never blocking on a FIFO (refused with or
    without a reader), never a device, directory or a file with a second name; else
    UnsafeFile (or another OSError: permission denied, missing directory)."""
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _NONBLOCK | _CLOEXEC | _NOCTTY
    if how == "append":
        flags |= os.O_APPEND
    elif how not in ("truncate", "keep"):
        raise ValueError(f"how: {how!r}")
    try:
        fd = os.open(path, flags, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UnsafeFile(errno.ELOOP, "a symbolic link (not followed)", str(path)) from None
        if err.errno == errno.ENXIO:  # a FIFO nobody reads (O_NONBLOCK said so, not blocked)
            raise UnsafeFile(errno.ENXIO, "a FIFO, not a regular file", str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(errno.EINVAL, f"{_kind(st.st_mode)}, not a regular file", str(path))
        if st.st_nlink > 1:  # a hard link planted to someone's file is that file
            raise UnsafeFile(errno.EMLINK, "a file with another name (hard link)", str(path))
        if how == "truncate":
            os.ftruncate(fd, 0)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_tail(path: Path, max_bytes: int) -> bytes:
    """The last `max_bytes` of the regular file `path` (opened as `read_regular` opens)."""
    fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC | _NOCTTY | _NOFOLLOW)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(errno.EINVAL, f"{_kind(st.st_mode)}, not a regular file", str(path))
        return os.pread(fd, max_bytes, max(0, st.st_size - max_bytes))
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_file(path: Path, mode: int = 0o600) -> Iterator[BinaryIO]:
    """A binary file to write `path`'s new content into: a new temporary file beside it
    (O_EXCL, never an existing file or a link), given `mode` and moved onto `path` with
    `os.replace` when the block ends without an exception, removed when it raises. A link,
    FIFO or file planted under the name is replaced, never followed or opened."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # The name cut short: a long one (up to NAME_MAX) would leave no room for the rest.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:32]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), mode)
            yield out
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """`path` replaced whole by `data` (`atomic_file`): a reader sees the old file or the new."""
    with atomic_file(path, mode) as out:
        out.write(data)


def rewrite_in_place(path: Path, data: bytes) -> None:
    """The existing regular file `path` (never a link, never created) overwritten by `data`,
    cut to its length and synced. For when `write_atomic` cannot make its new file (a full
    disk, a directory that takes no new files): the file's own blocks take `data` when it is no
    longer than the file. A reader may see half of it meanwhile, so this is a last resort."""
    fd = os.open(path, os.O_WRONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC | _NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafeFile(errno.EINVAL, f"{_kind(mode)}, not a regular file", str(path))
        view, offset = memoryview(data), 0
        while offset < len(data):
            offset += os.pwrite(fd, view[offset:], offset)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)
