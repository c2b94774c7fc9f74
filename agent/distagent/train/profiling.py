"""Profiling windows of the training loop: TensorFlow's profiler over chosen steps.

A window is a range of steps [start, end). The profiler starts before the first compiled call at
or after `start` and stops after the call that reaches `end`; while it is open each call runs
inside `Trace("train", step_num=step, _r=1)`, the step marker every analyser (TensorBoard's,
distcore.profile's) splits the profile by. Windows come from the config (`[profile] steps`),
from `distagent profile` (a request file, profile_request.py, looked for at each log point) and
from `on_input_bound` (the interval's own measured input wait at or over INPUT_WAIT_HIGH, at
most once per `interval_minutes`).

Off (no window planned, none asked for), a step costs one method call returning a shared null
context and a log point one failed `stat`: no profiler, no trace. Only the chief profiles: the
workers of one host would write the same `<host>.xplane.pb`. The profile lands in the run's
`train/plugins/profile/<time>/`, where distmon's reader looks.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from distagent.schema import ProfileConfig
from distagent.train.profile_request import Answer, take_request, write_answer
from distcore import names
from distcore.profile import profiles_at
from distcore.textsafe import terminal_text

_OFF: AbstractContextManager[Any] = contextlib.nullcontext()


class Backend(Protocol):
    def start(self, logdir: str) -> None: ...
    def stop(self) -> None: ...
    def trace(self, step: int) -> AbstractContextManager[Any]: ...


class TensorFlowProfiler:
    """tf.profiler.experimental, imported when a window first opens."""

    def start(self, logdir: str) -> None:
        import tensorflow as tf

        tf.profiler.experimental.start(logdir)

    def stop(self) -> None:
        import tensorflow as tf

        tf.profiler.experimental.stop()

    def trace(self, step: int) -> AbstractContextManager[Any]:
        import tensorflow as tf

        return tf.profiler.experimental.Trace("train", step_num=step, _r=1)


@dataclass
class Window:
    start: int
    end: int
    why: str
    request_id: str | None = None
    before: frozenset[Path] = frozenset()
    """The profiles already in the folder when it opened: the new one is the one not in it."""


class Profiling:
    """The loop's profiling windows; `Profiling()` is the one that never profiles."""

    def __init__(
        self,
        settings: ProfileConfig | None = None,
        *,
        run_dir: Path | None = None,
        backend: Backend | None = None,
        say: Callable[[str], None] = lambda line: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`run_dir` None: never profiles (a worker that is not the chief, or no job)."""
        self.settings = settings or ProfileConfig()
        self.run_dir = run_dir
        self.backend = backend or TensorFlowProfiler()
        self.say, self.clock = say, clock
        planned = self.settings.steps if run_dir is not None else ()
        self._planned = [Window(planned[0], planned[1], "[profile] steps")] if planned else []
        """Windows to open, by start."""
        self._open: Window | None = None
        self._last_auto: float | None = None
        self._at = 0  # the last step the open window reached
        self.starts = 0
        """Profiler sessions started (0 for a job that never asked for one)."""

    @property
    def logdir(self) -> Path | None:
        return None if self.run_dir is None else self.run_dir / names.TRAIN_DIR

    def between(self, step: int) -> float:
        """Before the call starting at `step`: the open window closes once it reached its end,
        a planned one opens once `step` reached its start; the seconds this took (the profiler's
        own, which the loop leaves out of the steps' timing)."""
        if self._open is None and not self._planned:
            return 0.0
        began = time.perf_counter()
        if self._open is not None and step >= self._open.end:
            self._finish()
        if self._open is None and self._planned and step >= self._planned[0].start:
            planned = self._planned.pop(0)
            if step < planned.end:  # else resumed past it
                self._begin(planned, step)
        return time.perf_counter() - began

    def trace(self, step: int) -> AbstractContextManager[Any]:
        """The context the call starting at `step` and its bookkeeping run in."""
        if self._open is None:
            return _OFF
        self._at = step
        return self.backend.trace(step)

    def logged(self, step: int, input_wait: float | None) -> None:
        """A log point at `step`, with the interval's input wait fraction (None: not timed)."""
        if self.run_dir is None:
            return
        request = take_request(self.run_dir)
        if isinstance(request, str):
            self.say(f"profile request ignored: {terminal_text(request, 200)}")
        elif request is not None:
            if self._open is not None:
                write_answer(self.run_dir, Answer(request.id, None, "a profile is already "
                                                  "being taken; ask again when it is written"))
            else:
                self._plan(Window(step, step + request.steps, "requested", request.id))
        if self.settings.on_input_bound and input_wait is not None \
                and input_wait >= names.INPUT_WAIT_HIGH and self._auto_due(step):
            self._last_auto = self.clock()
            self._plan(Window(step, step + self.settings.input_bound_steps,
                              f"input-bound, {input_wait:.0%} of the time waiting for input"))

    def _plan(self, window: Window) -> None:
        self._planned = sorted([*self._planned, window], key=lambda w: w.start)

    def _auto_due(self, step: int) -> bool:
        """No window open or about to open, and the last automatic one long enough ago."""
        if self._open is not None or any(w.start <= step for w in self._planned):
            return False
        last = self._last_auto
        return last is None or self.clock() - last >= self.settings.interval_minutes * 60

    def close(self) -> None:
        """The loop ended (finished, stopped, failed): an open window is written now."""
        if self._open is not None:
            self._finish()

    def _begin(self, window: Window, step: int) -> None:
        logdir = self.logdir
        assert logdir is not None  # a window is planned only with a run directory
        window.before = frozenset(profiles_at(logdir))
        try:
            self.backend.start(str(logdir))
        except Exception as err:  # another profiler session, a full disk: say it, train on
            self._refused(window, f"the profiler did not start: {err}")
            return
        self.starts += 1
        window.start = step
        self._open, self._at = window, step

    def _finish(self) -> None:
        window, self._open = self._open, None
        assert window is not None and self.logdir is not None
        try:
            self.backend.stop()
        except Exception as err:
            self._refused(window, f"the profile was not written: {err}")
            return
        new = sorted(set(profiles_at(self.logdir)) - window.before,
                     key=lambda p: (p.parent.name, str(p)))
        if not new:
            self._refused(window, "the profiler wrote no profile")
            return
        self.say(terminal_text(f"profile of steps {window.start}-{self._at} ({window.why}): "
                               f"{new[-1]}"))
        if window.request_id is not None and self.run_dir is not None:
            write_answer(self.run_dir, Answer(window.request_id, str(new[-1]), None))

    def _refused(self, window: Window, why: str) -> None:
        self.say(terminal_text(f"no profile of steps from {window.start} ({window.why}): {why}"))
        if window.request_id is not None and self.run_dir is not None:
            write_answer(self.run_dir, Answer(window.request_id, None, why))
