"""Host sampling with real psutil; the CPU-% arithmetic as a pure function."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import namedtuple

import psutil
import pytest

from distcore.telemetry.host import PsutilHostReader, cpu_percent_between

Times = namedtuple("Times", "user nice system idle iowait irq softirq steal guest guest_nice")


def times(user: float, idle: float, *, iowait: float = 0.0, guest: float = 0.0) -> Times:
    return Times(user, 0.0, 0.0, idle, iowait, 0.0, 0.0, 0.0, guest, 0.0)


@pytest.mark.parametrize(
    ("before", "after", "percent"),
    [
        (times(10, 10), times(15, 15), 50.0),
        (times(10, 10), times(20, 10), 100.0),
        (times(10, 10), times(10, 20), 0.0),
        # iowait is idle time, not busy
        (times(10, 10), times(12, 14, iowait=4), 20.0),
        # guest time is already inside user: counting it twice would inflate the share
        (times(10, 10, guest=0), times(15, 15, guest=5), 50.0),
        # no time passed (two reads within one clock tick)
        (times(10, 10), times(10, 10), 0.0),
    ],
)
def test_cpu_percent_between(before: Times, after: Times, percent: float) -> None:
    assert cpu_percent_between(before, after) == percent


def test_host_sample_is_real_and_consistent() -> None:
    source = PsutilHostReader()
    sample = source.sample()
    source.close()
    assert len(sample.per_core) == psutil.cpu_count()
    assert all(0.0 <= c <= 100.0 for c in (*sample.per_core, sample.cpu_percent))
    assert 0 < sample.memory_used_mib <= sample.memory_total_mib
    assert sample.memory_total_mib == pytest.approx(psutil.virtual_memory().total / 2**20)
    assert sample.load_avg == pytest.approx(os.getloadavg(), abs=5.0)
    assert sample.processes == ()


def test_first_sample_waits_out_the_minimum_window() -> None:
    now = [100.0]
    slept: list[float] = []
    source = PsutilHostReader(clock=lambda: now[0], sleep=slept.append, min_window=0.1)
    now[0] += 0.02
    source.sample()
    now[0] += 5.0
    source.sample()
    assert slept == [pytest.approx(0.08)]


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_watched_processes_cpu_and_rss() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    source = PsutilHostReader([os.getpid(), gone.pid])
    _burn(0.2)
    mine, other = source.sample().processes
    source.close()
    assert mine.pid == os.getpid() and mine.error is None
    assert mine.name == psutil.Process().name()
    assert mine.cpu_percent is not None and mine.cpu_percent > 0.0
    assert mine.rss_mib is not None and mine.rss_mib > 10.0
    assert (other.pid, other.cpu_percent, other.rss_mib) == (gone.pid, None, None)
    assert other.error == "not found or not accessible"


def test_process_exiting_while_watched() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    source = PsutilHostReader([child.pid])
    child.kill()
    child.wait()
    (proc,) = source.sample().processes
    source.close()
    assert (proc.cpu_percent, proc.rss_mib, proc.error) == (None, None, "exited")
