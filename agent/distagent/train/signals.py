"""SIGTERM and SIGINT during training: note the request, let the loop stop at a step boundary.

The handler only sets a flag; the loop checks it between compiled calls, saves a checkpoint and
ends with status `stopped`. A second signal while stopping is ignored (the save is short) rather
than turned into an abrupt KeyboardInterrupt halfway through writing a checkpoint.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Context manager installing the handlers (main thread only; elsewhere a plain flag)."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def request(self, reason: str) -> None:
        if self.signal_name is None:
            self.signal_name = reason

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.request(signal.Signals(signum).name)

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
