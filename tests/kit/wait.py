"""Waiting for a state, never for a fixed time: poll a predicate until it holds, and on a timeout
fail naming what was awaited. The timeout bounds a failure only (a loaded machine is slow); a
passing test returns as soon as the state is there."""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar

T = TypeVar("T")
EVERY = 0.05  # polling pace: quick to notice, light on a 2-core machine
# What a predicate returns: its value, or a falsy "not yet" that wait_until never returns.
Polled = Callable[[], T | Literal[False] | None]


class WaitTimeout(AssertionError, TimeoutError):
    """A state that never came: a test failure (AssertionError) and a timeout alike, so callers
    that catch either keep working."""


def _named(predicate: Callable[[], Any], what: str | None) -> str:
    """`what`, or else the predicate's own source line: a failure always says what it awaited."""
    if what is not None:
        return what
    with contextlib.suppress(OSError, TypeError):
        return " ".join(inspect.getsource(predicate).split())
    return repr(predicate)


def _timed_out(what: str, timeout: float, detail: Callable[[], str] | None) -> WaitTimeout:
    more = f"\n{detail()}" if detail is not None else ""
    return WaitTimeout(f"timed out after {timeout:g} s waiting for {what}{more}")


class _Poll(Generic[T]):
    """One poll of a wait: predicate()'s value, None for "not yet", WaitTimeout once past the
    deadline (the sync and the async wait share it)."""

    def __init__(self, predicate: Polled[T], what: str | None, timeout: float,
                 detail: Callable[[], str] | None) -> None:
        self.predicate, self.what, self.timeout, self.detail = predicate, what, timeout, detail
        self.deadline = time.monotonic() + timeout

    def __call__(self) -> T | None:
        value = self.predicate()
        if value:
            return value
        if time.monotonic() >= self.deadline:
            raise _timed_out(_named(self.predicate, self.what), self.timeout, self.detail)
        return None


def wait_until(predicate: Polled[T], what: str | None = None, timeout: float = 60.0,
               every: float = EVERY, detail: Callable[[], str] | None = None) -> T:
    """predicate()'s first truthy value, polled every `every` s; WaitTimeout naming `what` (by
    default the predicate's source) and `detail()` (e.g. a server's log) when `timeout` s pass
    without one. An exception the predicate raises (a process that died) ends the wait at once."""
    poll = _Poll(predicate, what, timeout, detail)
    while (value := poll()) is None:
        time.sleep(every)
    return value


async def until(pilot: Any, predicate: Polled[T], what: str | None = None,
                timeout: float = 60.0, every: float = EVERY,
                detail: Callable[[], str] | None = None) -> T:
    """wait_until for a Textual pilot: pauses the pilot between polls, so the app runs."""
    poll = _Poll(predicate, what, timeout, detail)
    while (value := poll()) is None:
        await pilot.pause(every)
    return value
