"""Callbacks a producer tells about its changes: the run store (which runs changed) and the job
index (a new snapshot). One lock of its own, and calls made outside it, so a listener may call
back into the producer."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Listeners(Generic[T]):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[T], None]] = []

    def subscribe(self, callback: Callable[[T], None]) -> Callable[[], None]:
        """Add `callback`; returns the function that removes it (safe to call twice)."""
        with self._lock:
            self._callbacks.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        return unsubscribe

    def current(self) -> list[Callable[[T], None]]:
        """The callbacks now, to be called outside any lock."""
        with self._lock:
            return list(self._callbacks)
