"""Ending a child process we started: ask (SIGTERM), wait a bounded time, then insist (SIGKILL).
One rule for every child (a training run under `scale`, an ssh ControlMaster), so none is left
running or unreaped."""

from __future__ import annotations

import subprocess
from typing import Any


def stop_child(child: subprocess.Popen[Any], timeout: float) -> None:
    """Terminate `child` if it still runs, wait up to `timeout` seconds, then kill and reap it."""
    if child.poll() is None:
        child.terminate()
    try:
        child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
