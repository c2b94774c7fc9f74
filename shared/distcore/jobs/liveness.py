"""Whether a job that run.json calls running has lost its process, where that can be known.

A job killed without a chance to write its end (SIGKILL, out of memory) leaves run.json
`running` for ever. Where run.json's `host` is this machine, its pid tells at once: no such
process, a zombie, or a process started at another time (the pid reused) means the job `died`.
A job on another machine, or one whose record lacks a pid or start time, is never called
dead from here (its heartbeats, where it has several workers, say when it hangs).
"""

from __future__ import annotations

import math
import socket
from collections.abc import Mapping
from typing import Any

import psutil

# psutil derives create_time from the boot time, which the kernel reports with up to a second
# of jitter.
CREATE_TIME_TOLERANCE_S = 0.5


def is_local(record: Mapping[str, Any], this_host: str | None = None) -> bool:
    """run.json's `host` is this machine's name."""
    host = record.get("host")
    return isinstance(host, str) and host == (this_host or socket.gethostname())


def process_gone(record: Mapping[str, Any], this_host: str | None = None) -> bool:
    """True only when run.json's process is provably gone: recorded on this machine with a
    positive integer pid and a finite start time, and that pid is now no process, a zombie, or
    a process started at another time. False whenever it cannot be known."""
    pid, created = record.get("pid"), record.get("pid_create_time")
    if type(pid) is not int or pid <= 0 or not is_local(record, this_host):
        return False
    if not isinstance(created, int | float) or isinstance(created, bool) \
            or not math.isfinite(created):
        return False
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - float(created)) > CREATE_TIME_TOLERANCE_S:
            return True
        return bool(proc.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True
    except (psutil.Error, OSError, ValueError, OverflowError):
        return False
