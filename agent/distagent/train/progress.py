"""What `distagent start` prints while it trains.

On a terminal: one line redrawn in place (step, epoch, loss, examples/s, input wait). Otherwise
(a pipe, a log file, `--detach`): plain lines, at most one per `min_interval` seconds, and always
at the last step, so a log stays readable.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import TextIO

from distcore import names


def input_wait_band(fraction: float) -> str:
    """The TF profiler's bands for the share of step time spent waiting for input."""
    if fraction >= names.INPUT_WAIT_HIGH:
        return "highly input-bound"
    if fraction >= names.INPUT_WAIT_MODERATE:
        return "moderately input-bound"
    return "ok"


def format_progress(
    step: int, total: int, epoch: int, epochs: int, scalars: Mapping[str, float]
) -> str:
    parts = [f"step {step}/{total}", f"epoch {epoch}/{epochs}"]
    if names.LOSS in scalars:
        parts.append(f"loss {scalars[names.LOSS]:.4f}")
    if names.ACCURACY in scalars:
        parts.append(f"acc {scalars[names.ACCURACY]:.3f}")
    if names.EXAMPLES_PER_SECOND in scalars:
        parts.append(f"{scalars[names.EXAMPLES_PER_SECOND]:,.0f} ex/s")
    if names.INPUT_WAIT_FRACTION in scalars:
        fraction = scalars[names.INPUT_WAIT_FRACTION]
        parts.append(f"input wait {fraction:.0%} ({input_wait_band(fraction)})")
    if names.MFU in scalars:
        parts.append(f"MFU {scalars[names.MFU]:.1%}")
    return "  ".join(parts)


def _bar(step: int, total: int, width: int = 20) -> str:
    done = int(width * step / max(total, 1))
    return "[" + "#" * done + "." * (width - done) + "]"


class Progress:
    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        tty: bool | None = None,
        min_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.min_interval = min_interval
        self._clock = clock
        self._last: float | None = None
        self._open_line = False

    def update(self, step: int, total: int, epoch: int, epochs: int,
               scalars: Mapping[str, float]) -> None:
        line = format_progress(step, total, epoch, epochs, scalars)
        if self.tty:
            self.stream.write(f"\r\x1b[2K{_bar(step, total)} {line}")
            self._open_line = True
        else:
            now = self._clock()
            if self._last is not None and now - self._last < self.min_interval and step < total:
                return
            self._last = now
            self.stream.write(line + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        self.close()
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._open_line:
            self.stream.write("\n")
            self.stream.flush()
            self._open_line = False


class Quiet(Progress):
    """No output (tests, and workers other than the chief)."""

    def update(self, step: int, total: int, epoch: int, epochs: int,
               scalars: Mapping[str, float]) -> None:
        return

    def message(self, text: str) -> None:
        return
