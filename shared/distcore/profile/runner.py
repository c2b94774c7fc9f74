"""`summarize(path)`: one profile read in a subprocess under memory, CPU and time limits.

A profile is outside data, and parsing it costs memory in proportion to its events (every
parser in Python holds the whole message), so a hostile or merely huge file must cost no more
than its run's line: the file's size is checked first, then a child interpreter reads it with
RLIMIT_AS (its address space) and RLIMIT_CPU set, and the caller waits at most `timeout_s`.
Whatever goes wrong, the answer is a `ProfileError` whose message is
"profile unreadable: <why>"; this never raises for anything the file holds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Final

import distcore
from distcore.profile.summary import ProfileError, ProfileSummary, from_json
from distcore.textsafe import terminal_text

MAX_BYTES: Final = 64 * 1024 * 1024
MAX_MEMORY: Final = 2 * 1024 * 1024 * 1024
TIMEOUT_S: Final = 60.0
_MIB: Final = 1024 * 1024


def summarize(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = MAX_BYTES,
    timeout_s: float = TIMEOUT_S,
    max_memory: int = MAX_MEMORY,
) -> ProfileSummary | ProfileError:
    """The summary of one `*.xplane.pb`, or why it could not be read."""
    shown = terminal_text(os.fspath(path))
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        return ProfileError(shown, f"cannot be read ({terminal_text(exc.strerror or exc)})")
    if size > max_bytes:
        return ProfileError(shown, f"{_size(size)}, over the {_size(max_bytes)} size cap")
    command = [sys.executable, "-m", "distcore.profile.worker", os.fspath(path),
               str(max_bytes), str(max_memory), str(max(1, int(timeout_s) + 1))]
    try:
        done = subprocess.run(
            command, capture_output=True, timeout=timeout_s, env=_child_env(),
            stdin=subprocess.DEVNULL, check=False,
        )
    except subprocess.TimeoutExpired:
        return ProfileError(shown, f"reading it took over {timeout_s:g} s")
    except OSError as exc:
        return ProfileError(shown, f"the reader could not start ({terminal_text(exc)})")
    return _answer(shown, done, max_memory)


def _size(count: int) -> str:
    return f"{count / _MIB:.1f} MiB" if count >= _MIB else f"{count} bytes"


def _child_env() -> dict[str, str]:
    """The child finds this distcore first, whatever the caller's path holds."""
    env = dict(os.environ)
    root = str(Path(distcore.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    # numpy's BLAS starts a thread a core at import, each with its own address space, which
    # RLIMIT_AS counts: on a machine of many cores that alone would pass the memory limit.
    # The reader does no linear algebra.
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = "1"
    return env


def _answer(
    shown: str, done: subprocess.CompletedProcess[bytes], max_memory: int
) -> ProfileSummary | ProfileError:
    if done.returncode == 0:
        try:
            answer = from_json(json.loads(done.stdout))
        except (ValueError, KeyError, TypeError) as exc:
            return ProfileError(shown, f"the reader's answer did not parse ({exc})")
        return answer if isinstance(answer, ProfileSummary) else ProfileError(
            shown, answer.reason)
    memory = f"over the memory limit of {max_memory / _MIB:.0f} MiB"
    stderr = done.stderr.decode("utf-8", "replace")
    if "MemoryError" in stderr or "bad_alloc" in stderr or "out of memory" in stderr.lower():
        return ProfileError(shown, memory)
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return ProfileError(shown, "over its CPU-time limit")
    if done.returncode in (-signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS):
        # The C parser aborts where an allocation fails under RLIMIT_AS.
        return ProfileError(shown, f"the reader was killed by signal {-done.returncode}, "
                                   f"likely {memory}")
    last = stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
    return ProfileError(shown, f"the reader failed ({terminal_text(last[0], 200)})")
