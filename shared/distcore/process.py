"""The external commands distmon runs: which file runs, and how a child we started ends.

A command named without a directory (`ssh`, `squeue`) is looked up on the absolute elements of
PATH only: an empty element (`:/usr/bin`) or a relative one (`.`, `bin`) stands for the working
directory, which may be a logdir where anyone training can plant a program of that name, and
`execvp` would run it. The child is then started by that absolute path.

Ending one: ask (SIGTERM), wait a bounded time, then insist (SIGKILL). One rule for every child
(a training run under `scale`, an ssh ControlMaster), so none is left running or unreaped."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any


def trusted_path(path: str | None) -> str:
    """PATH without its empty and relative elements (each of them means the working directory,
    or a directory below it)."""
    return os.pathsep.join(p for p in (path or "").split(os.pathsep) if os.path.isabs(p))


def find_command(name: str) -> str | None:
    """The absolute path of the command `name` on the trusted part of PATH; None when absent.
    An absolute `name` (a configured path) is taken as it is if it runs; a relative one with a
    directory (`bin/ssh`) is the working directory again, never run."""
    if os.sep in name:
        runs = os.path.isabs(name) and os.access(name, os.X_OK) and not os.path.isdir(name)
        return name if runs else None
    return shutil.which(name, path=trusted_path(os.environ.get("PATH", os.defpath))) or None


def stop_child(child: subprocess.Popen[Any], timeout: float) -> None:
    """Terminate `child` if it still runs, wait up to `timeout` seconds, then kill and reap it."""
    if child.poll() is None:
        child.terminate()
    try:
        child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
