"""One exception family for user-caused errors; the CLIs print them as one line and exit 2."""

from __future__ import annotations

import errno
import os
import resource


class DistmonError(Exception):
    """An error a user can cause and fix (bad path, bad config, bad flag)."""

    exit_code = 2


class ConfigError(DistmonError):
    """A problem in a config file, located by file and dotted key path."""

    def __init__(self, path: str, key: str, message: str) -> None:
        self.path = path
        self.key = key
        self.message = message
        super().__init__(f"{path}: {key}: {message}" if key else f"{path}: {message}")


class ConfigErrors(DistmonError):
    """Several config problems at once, reported one line each."""

    def __init__(self, errors: list[ConfigError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


def descriptor_shortage(err: BaseException) -> str | None:
    """Why a call found no file descriptor free, the same each time while it lasts (the file
    that could not be opened, another one each time, left out); None for any other error."""
    if isinstance(err, OSError) and err.errno == errno.EMFILE:
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return f"{err.strerror} (at this process's limit of {limit}: ulimit -n)"
    if isinstance(err, OSError) and err.errno == errno.ENFILE:
        return f"{err.strerror} (the system's limit, fs.file-max)"
    return None


class StorageError(DistmonError):
    """A write the disk refused (full, over quota, no new files allowed): the job ends `failed`
    with this one line (exit 1, as any failed job)."""

    exit_code = 1


_NO_ROOM = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded"}
STORAGE_ERRNOS: frozenset[int] = frozenset((*_NO_ROOM, errno.EPERM, errno.EACCES, errno.EROFS))
# TensorFlow reports a refused write as text ("<file>; No space left on device"), not an errno;
# its "Permission denied" can be a read's, so only the causes that are a write's are matched.
_STORAGE_TEXT = {os.strerror(n): n for n in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EPERM)}


def storage_line(number: int, where: str | os.PathLike[str]) -> str:
    """The cause of a refused write, in a few words naming the place: "disk full on <where>"."""
    if number in _NO_ROOM:
        return f"{_NO_ROOM[number]} on {where}"
    return f"cannot write in {where} ({os.strerror(number).lower()})"


def storage_problem(err: BaseException, where: str | os.PathLike[str] | None = None) -> str | None:
    """`storage_line` for an error that is a refused write (an OSError with one of
    STORAGE_ERRNOS, or TensorFlow's text naming one), at `where` or else the directory of the
    file the error names; None for any other error."""
    if isinstance(err, OSError) and err.errno in STORAGE_ERRNOS:
        place = where or (os.path.dirname(err.filename) if isinstance(err.filename, str) else "")
        return storage_line(err.errno, place or "this disk")
    text = str(err)
    for strerror, number in _STORAGE_TEXT.items():
        at = text.find(strerror)
        if at >= 0:
            return storage_line(number, where or _named_directory(text[:at]) or "this disk")
    return None


def _named_directory(text: str) -> str:
    """The directory of the path that ends `text` ("... /run/train/events.out...; "), else ""."""
    words = text.split()
    path = words[-1].rstrip(";:,") if words else ""
    return os.path.dirname(path) if path.startswith("/") else ""
