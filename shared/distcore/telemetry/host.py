"""Host sampling through psutil: per-core CPU %, load average, memory, and watched processes.

CPU % is computed here from two `cpu_times` readings rather than with `psutil.cpu_percent`,
whose "since the last call" state is global to the process: two samplers would steal each
other's intervals. The first reading is taken at construction; a sample earlier than
`min_window` after it waits out the rest, so no sample ever reports a meaningless 0 %.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import psutil

from distcore.telemetry.rapl import RaplReader
from distcore.telemetry.samples import HostSample, ProcessSample

MIB = 1024 * 1024
# CPU-time fields that are already counted in user/nice (Linux), so not added twice.
_COUNTED_TWICE = ("guest", "guest_nice")
_IDLE = ("idle", "iowait")


def busy_and_total(times: Any) -> tuple[float, float]:
    """(busy, total) seconds from one psutil cpu_times record."""
    fields = {name: float(getattr(times, name)) for name in times._fields}
    total = sum(v for k, v in fields.items() if k not in _COUNTED_TWICE)
    idle = sum(fields.get(k, 0.0) for k in _IDLE)
    return total - idle, total


def cpu_percent_between(before: Any, after: Any) -> float:
    """Busy share of the time between two cpu_times readings, in percent (0 if none passed)."""
    busy0, total0 = busy_and_total(before)
    busy1, total1 = busy_and_total(after)
    elapsed = total1 - total0
    if elapsed <= 0:
        return 0.0
    return round(min(100.0, max(0.0, 100.0 * (busy1 - busy0) / elapsed)), 1)


def _load_avg() -> tuple[float, float, float] | None:
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):  # not on this platform
        return None
    return (one, five, fifteen)


class PsutilHostReader:
    """Samples this machine's CPU, memory and `pids` (processes to follow, e.g. the training
    job) through psutil: the host half of a TelemetrySource. Not to be confused with
    `distcore.jobs.snapshots.HostSource`, the protocol of producers of whole `Host`s (remote
    GPUs)."""

    def __init__(
        self,
        pids: Sequence[int] = (),
        *,
        min_window: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rapl: RaplReader | None = None,
    ) -> None:
        self._clock = clock
        self._rapl = rapl if rapl is not None else RaplReader()
        self._sleep = sleep
        self._min_window = min_window
        self._pids = tuple(pids)
        self._procs: dict[int, psutil.Process] = {}
        for pid in self._pids:
            self._watch(pid)  # primes its CPU counter, so the first sample has a value
        self._last_total = psutil.cpu_times()
        self._last_cores = psutil.cpu_times(percpu=True)
        self._last_time = clock()

    def _watch(self, pid: int) -> None:
        try:
            proc = psutil.Process(pid)
            proc.cpu_percent(None)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return
        self._procs[pid] = proc

    def sample(self) -> HostSample:
        waited = self._clock() - self._last_time
        if waited < self._min_window:
            self._sleep(self._min_window - waited)
        total, cores = psutil.cpu_times(), psutil.cpu_times(percpu=True)
        cpu = cpu_percent_between(self._last_total, total)
        # strict=False: a CPU taken offline between readings shortens the list; skip it.
        pairs = zip(self._last_cores, cores, strict=False)
        per_core = tuple(cpu_percent_between(a, b) for a, b in pairs)
        self._last_total, self._last_cores, self._last_time = total, cores, self._clock()
        memory = psutil.virtual_memory()
        return HostSample(
            cpu_percent=cpu,
            per_core=per_core,
            load_avg=_load_avg(),
            memory_used_mib=(memory.total - memory.available) / MIB,
            memory_total_mib=memory.total / MIB,
            processes=tuple(self._process(pid) for pid in self._pids),
            energy_joules=self._rapl.read(),
        )

    def _process(self, pid: int) -> ProcessSample:
        proc = self._procs.get(pid)
        if proc is None:
            return ProcessSample(pid, None, None, None, "not found or not accessible")
        try:
            with proc.oneshot():
                return ProcessSample(
                    pid, proc.name(), round(proc.cpu_percent(None), 1),
                    proc.memory_info().rss / MIB,
                )
        except psutil.NoSuchProcess:
            return ProcessSample(pid, None, None, None, "exited")
        except psutil.AccessDenied:
            return ProcessSample(pid, None, None, None, "access denied")

    def close(self) -> None:
        self._procs.clear()
