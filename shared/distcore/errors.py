"""One exception family for user-caused errors; the CLIs print them as one line and exit 2."""

from __future__ import annotations

import errno
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
