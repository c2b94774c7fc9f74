"""A CPU host's peak FLOP/s for MFU, measured so that it repeats.

A CPU has no datasheet figure a replica could reach, so the agent times a dense matrix multiply
on the host. One timing at start moved with whatever else ran (twofold between two runs on one
machine), and MFU with it. So the multiply is warmed up (threads started, clocks raised, the
kernel chosen), then timed PROBE_RUNS times and the median kept; and the result is kept per
host, precision and TensorFlow version in the user's cache (`$XDG_CACHE_HOME/distmon`, or
`DISTMON_CACHE_DIR`) with the date it was measured, for CACHE_DAYS: every job on the host uses
the same figure, and says when it was measured. The workers of a job on one host (launch-local)
measure one at a time under a lock, so the first measures alone and the others read its figure.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import socket
import statistics
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from distcore.safefile import load_json, write_atomic

PROBE_SECONDS: Final = 0.02
"""A probe's multiply is grown until one run takes at least this long (timer noise)."""
PROBE_MAX_N: Final = 2048
PROBE_RUNS: Final = 7
WARMUP_SECONDS: Final = 0.3  # of multiplies before any is timed
CACHE_DAYS: Final = 30  # a figure older than this is measured again (a new machine, a BIOS)
CACHE_NAME: Final = "cpu_peak.json"
MAX_CACHE_BYTES: Final = 1 << 20


@dataclass(frozen=True)
class CpuPeak:
    flops_per_second: float
    measured_on: datetime.date


def cache_dir(environ: Mapping[str, str]) -> Path:
    if environ.get("DISTMON_CACHE_DIR"):
        return Path(environ["DISTMON_CACHE_DIR"])
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "distmon"


def host_key(dtype: str, tf_version: str) -> str:
    """What a figure is valid for: this host, the cores this process may use, the precision
    and the TensorFlow that multiplies."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{socket.gethostname()} {cores} cores {dtype} tf {tf_version}"


def cached(doc: Any, key: str, today: datetime.date) -> CpuPeak | None:
    """The figure for `key` in the cache's document, if it is well formed and recent enough."""
    entry = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(entry, dict):
        return None
    rate, day = entry.get("flops_per_second"), entry.get("measured_on")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate < float("inf"):
        return None
    try:
        measured = datetime.date.fromisoformat(str(day))
    except ValueError:
        return None
    age = (today - measured).days
    return CpuPeak(float(rate), measured) if 0 <= age <= CACHE_DAYS else None


def median_rate(n: int, seconds: list[float]) -> float:
    """FLOP/s of an n×n multiply from its timed runs: the median run's."""
    return 2.0 * n**3 / max(statistics.median(seconds), 1e-9)


def measure(tf: Any, dtype: Any, clock: Any = time.perf_counter) -> float:
    """The multiply's FLOP/s on this host: the size grown until a run is long enough, warmed,
    then the median of PROBE_RUNS timed runs."""
    with tf.device("/CPU:0"):
        n = 256
        while True:
            a = tf.cast(tf.random.uniform((n, n), dtype=tf.float32), dtype)
            tf.linalg.matmul(a, a).numpy()  # this size's first run chooses its kernel
            start = clock()
            tf.linalg.matmul(a, a).numpy()
            if clock() - start >= PROBE_SECONDS or n >= PROBE_MAX_N:
                break
            n *= 2
        warm_until = clock() + WARMUP_SECONDS
        while clock() < warm_until:
            tf.linalg.matmul(a, a).numpy()
        seconds = []
        for _ in range(PROBE_RUNS):
            start = clock()
            tf.linalg.matmul(a, a).numpy()
            seconds.append(clock() - start)
    return median_rate(n, seconds)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One measurer at a time on this host (where the cache can be written at all)."""
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(directory / f"{CACHE_NAME}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read(path: Path) -> Any:
    try:
        return load_json(path, MAX_CACHE_BYTES)
    except (OSError, ValueError):  # none yet, or not ours to trust: measure again
        return {}


def host_peak(tf: Any, dtype: Any, *, environ: Mapping[str, str] = os.environ,
              today: datetime.date | None = None) -> CpuPeak:  # fmt: skip
    """This host's figure from the cache, else measured now and kept there."""
    today = today or datetime.date.today()
    directory = cache_dir(environ)
    path, key = directory / CACHE_NAME, host_key(dtype.name, tf.__version__)
    with _locked(directory):
        doc = _read(path)
        found = cached(doc, key, today)
        if found is not None:
            return found
        peak = CpuPeak(measure(tf, dtype), today)
        kept = doc if isinstance(doc, dict) else {}
        kept[key] = {"flops_per_second": peak.flops_per_second,
                     "measured_on": today.isoformat()}  # fmt: skip
        with contextlib.suppress(OSError):  # a read-only home: measured again next time
            write_atomic(path, json.dumps(kept, indent=1).encode())
        return peak
