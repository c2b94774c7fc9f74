"""The producer kit: what every producer (watcher, sampler, scheduler, remote reader) shares.

- `ProducerError`: a producer's current failure, shown where it belongs while the rest works.
- `Producer`: the typed protocol a `JobIndex` and a `ProducerSet` drive (start, close, errors,
  problems), declared once here (the index's typed inputs are distcore.jobs.inputs').
- `Failing`: "failing since": keeps the first failure's time while the failure goes on.
- `Loop`: one producer thread: drift-free ticks (`next += interval`, missed ticks skipped after
  a stall), wake-ups, backoff after failures, a prompt close. The producer writes only its step;
  a step that paces itself (a costly pass, a tool missing there) says when it wants the next one
  (`next_in`), and a step that must pause (a debounce, coalescing) waits with `sleep`, which a
  close ends at once.

A leaf: imports nothing of distcore, so events, telemetry, jobs and remote can all use it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from distcore.errors import descriptor_shortage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProducerError:
    """A producer thread (reader, watcher, sampler, remote reader, the index itself) failed.
    Shown where it belongs; the rest keeps working."""

    producer: str  # "watcher", "telemetry", "ssh:gpu1", "jobs", ...
    message: str  # one line
    since: float


class Producer(Protocol):
    """What a job index gathers from and a producer set starts and closes."""

    def start(self) -> None: ...
    def close(self) -> None: ...
    def errors(self) -> tuple[ProducerError, ...]: ...
    def problems(self) -> tuple[str, ...]: ...


def next_deadline(deadline: float, now: float, interval: float) -> float:
    """The next tick on the grid `deadline + k * interval` that is still in the future."""
    deadline += interval
    if deadline <= now:
        deadline += (math.floor((now - deadline) / interval) + 1) * interval
    return deadline


def paced(ended: float, took: float, share: float, cap: float) -> float:
    """When costly work may start again, after a turn that ended at `ended` and took `took`
    s: the pause that keeps it at `share` of the time, at most `cap` s."""
    if took <= 0 or share >= 1:
        return ended
    return ended + min(cap, took * (1 - share) / share)


def backoff(failures: int, interval: float, limit: float) -> float:
    """Seconds to wait after `failures` failures in a row: the interval, doubled per failure
    after the first, never above `limit` (nor below the interval)."""
    if failures <= 1:
        return interval
    return max(interval, min(limit, interval * 2.0 ** min(failures - 1, 64)))


class Failing:
    """A producer's current failure. `fail()` keeps the first failure's time ("failing since",
    not "failed again"); with `restart_on_change` a different message starts a new failure.
    `ok()` clears it. Thread-safe."""

    def __init__(self, producer: str, *, restart_on_change: bool = False) -> None:
        self.producer, self._restart = producer, restart_on_change
        self._lock = threading.Lock()
        self._error: ProducerError | None = None

    def fail(self, message: str, now: float) -> None:
        with self._lock:
            old = self._error
            if old is not None and self._restart and old.message == message:
                return
            since = old.since if old is not None and not self._restart else now
            self._error = ProducerError(self.producer, message, since)

    def ok(self) -> None:
        with self._lock:
            self._error = None

    def errors(self) -> tuple[ProducerError, ...]:
        with self._lock:
            return (self._error,) if self._error is not None else ()


class Loop:
    """Runs `step` on its own daemon thread every `interval` seconds of `clock` until closed.

    Ticks sit on a grid from the first one (a slow step does not push later ones back; after a
    stall the missed ticks are skipped, not fired in a burst). `wake()` runs the step early.
    A step that raises is handed to `on_error` (never a silent death: the producer shows it as
    its ProducerError; logged at debug level then, with a traceback otherwise); with
    `max_backoff` the waits after failures in a row double up to it. `next_in()` (from the step
    or `on_error`) sets the next wait alone. `wait` (tests) replaces the stop/wake wait: it gets
    the seconds to wait and returns True to stop."""

    def __init__(
        self,
        name: str,
        step: Callable[[], object],
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        on_error: Callable[[Exception], None] | None = None,
        max_backoff: float | None = None,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.name, self.interval, self._step, self._clock = name, interval, step, clock
        self._on_error, self._max_backoff = on_error, max_backoff
        self._stop, self._wake = threading.Event(), threading.Event()
        self._wait = wait or self._wait_or_wake
        self._thread: threading.Thread | None = None
        self._next_in: float | None = None
        self.failures = 0  # in a row, counting the one `on_error` is handed

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"{self.name} already started")
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread is not None

    def wake(self) -> None:
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def stop_event(self) -> threading.Event:
        """Set once closing: a long pass checks it to end early."""
        return self._stop

    def next_in(self, seconds: float) -> None:
        """The next run `seconds` after this step ends, off the grid and instead of any backoff
        (a wake still runs it earlier). Call it from the step or from `on_error`."""
        self._next_in = max(0.0, seconds)

    def sleep(self, seconds: float) -> bool:
        """A pause inside the step that only a close ends (wakes do not); True when closing."""
        return self._stop.wait(seconds)

    def stop(self) -> None:
        """Ask the thread to end (it leaves its wait at once) without waiting for it: a
        producer can then interrupt what its step blocks on before `join`."""
        self._stop.set()
        self._wake.set()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread and join it, bounded: a step hung in a system call must not hang
        the app's exit (the thread is a daemon)."""
        self.stop()
        self.join(timeout)

    def join(self, timeout: float) -> None:
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _wait_or_wake(self, seconds: float) -> bool:
        self._wake.wait(seconds)
        self._wake.clear()
        return self._stop.is_set()

    def _run_step(self) -> bool:
        try:
            self._step()
        except Exception as err:
            self.failures += 1
            if self._on_error is None:
                shortage = descriptor_shortage(err)  # the user's limit, not a bug: one line
                if shortage is None:
                    log.exception("%s: step failed", self.name)
                else:
                    log.error("%s: step failed: %s", self.name, shortage)
                return False
            log.debug("%s: step failed", self.name, exc_info=True)
            try:
                self._on_error(err)
            except Exception:
                log.exception("%s: on_error failed", self.name)
            return False
        self.failures = 0
        return True

    def _run(self) -> None:
        deadline = self._clock()
        while not self._stop.is_set():
            self._next_in = None
            ok = self._run_step()
            now = self._clock()
            if self._next_in is not None:  # the step paced itself; a grid again from there
                deadline = now + self._next_in
            elif ok or self._max_backoff is None:
                deadline = next_deadline(deadline, now, self.interval)
            else:  # off the grid while failing; back on a grid from the next success
                deadline = now + backoff(self.failures, self.interval, self._max_backoff)
            if self._wait(max(0.0, deadline - self._clock())):
                return
