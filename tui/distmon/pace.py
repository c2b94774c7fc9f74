"""Pacing a costly redraw: at most as often as keeps it within a share of a core.

While a sweep's first read lands, the index hands the UI a snapshot up to every second, and a
redraw of a sweep's jobs (arrange the rows, update the table, lay the screen out and render
it) holds the GIL the readers need for much of that second, so unpaced redraws slowed the
listing itself (docs/benchmarks.md). Paced, the screen still fills in as the rows land, and a
key press always redraws at once (it does not go through the pacer). The job index paces its
own refreshes by the same rule (`distcore.producer.paced`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from distcore.producer import paced

SHARE = 0.25  # of the UI thread's time that snapshot redraws may take
MAX_WAIT = 4.0  # seconds: the screen is never older than this behind the index


class _Timers(Protocol):
    def set_timer(self, delay: float, callback: Callable[[], object]) -> object: ...

    def call_after_refresh(self, callback: Callable[[], object]) -> object: ...


class Pacer:
    """`request()` runs `draw` now, or once later when the last draw was costly; requests
    in between coalesce into that one (which draws whatever is newest then). The cost is
    the time from the start of `draw` to the end of the screen refresh it caused."""

    def __init__(
        self,
        owner: _Timers,
        draw: Callable[[], None],
        *,
        share: float = SHARE,
        clock: Callable[[], float] = time.monotonic,
        cost_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._owner, self._draw, self._share, self._clock = owner, draw, share, clock
        # Wall time, not the UI thread's CPU: the time it waits for the GIL is time the
        # readers hold it, and pacing by the CPU alone let the UI take twice as much.
        self._cost_clock = cost_clock
        self._next = float("-inf")
        self._waiting = False  # a timer is set, or a draw's refresh is not done yet
        self._drawing = False
        self.draws = 0  # for tests and the benchmark

    def request(self) -> None:
        if self._waiting:
            return  # a draw is due: it will show the newest snapshot
        wait = self._next - self._clock()
        if self._drawing or wait > 0:
            self._waiting = True
            if not self._drawing:
                self._owner.set_timer(wait, self._fire)
            return
        self._fire()

    def _fire(self) -> None:
        self._waiting, self._drawing = False, True
        began = self._cost_clock()
        self.draws += 1
        try:
            self._draw()
        finally:
            self._owner.call_after_refresh(lambda: self._done(began))

    def _done(self, began: float) -> None:
        self._next = paced(self._clock(), self._cost_clock() - began, self._share, MAX_WAIT)
        self._drawing = False
        if self._waiting:  # asked again while drawing: once more, when its turn comes
            self._waiting = False
            self.request()
