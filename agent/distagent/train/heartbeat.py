"""Each worker's heartbeat: a thread the training step cannot block, and what it does on a hang.

Every `BEAT_SECONDS` the thread writes `heartbeat-worker-<i>.json` into the run directory: the
last step that ended and when, where the step stands now (phases.py: the step whose gradients
this worker holds, read from the step's own variables by a second thread, so a probe that
blocks never stops the beat), and its time to gradients and time waiting in the reduction per
step over its last ~10 s of log intervals (perf_window.py). The chief copies every worker's
heartbeat into run.json's `workers`, where distmon reads them (local and remote alike).

A hang is no step ended for `cluster.hang_seconds` ("auto": the larger of 60 s and 10x the
median time between compiled calls), counted from the last call's end, or before the first
call ends, from when this worker holds its first gradients and waits in the reduction (tracing
and compilation come before that). Every live worker finds it on its own clock: all of them stop
stepping when one is stuck. Each writes its Python stacks (faulthandler, every thread) into
`stacks-worker-<i>.txt` once, says so on stderr, and marks its heartbeat hung. With
`on_hang = "abort"` it then ends the process with EXIT_HUNG; the chief first ends run.json
`hung`, keeping the last checkpoint (nothing is saved: the step is stuck).

A worker that aborts waits, up to ABORT_WAIT_BEATS beats, for every other worker's heartbeat to
say hung too before it exits. Each finds the hang on its own beat, up to a beat apart: one that
left at once cut the others' collectives, and a worker that had not yet found the hang ended
`failed` ("lost worker 1") instead of `hung`, the chief's run.json with it. While this thread
waits, a collective that fails in the training thread unwinds into `__exit__`, whose join
lets the abort finish first.

A chief stopped (SIGSTOP) or frozen fails nothing in TensorFlow: the coordination service that
would call it lost runs in the chief, so the others waited in the reduction without bound. A
non-chief that has found the job hung and sees a peer's heartbeat of this attempt older than
`cluster.timeout_seconds` ends at once (exit 1, whatever `on_hang`), naming that worker.
"""

from __future__ import annotations

import contextlib
import faulthandler
import math
import os
import socket
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distagent.train.perf_window import IntervalTiming, PerfWindow
from distagent.train.phases import PHASE_REDUCING, PhaseProbe
from distagent.train.rundir import write_json_whatever_the_disk
from distcore import names
from distcore.alerts.workers import hang_culprits
from distcore.errors import StorageError
from distcore.jobs.workers import worker_beats_from
from distcore.safefile import atomic_file, load_json

BEAT_SECONDS = 2.0
HANG_MIN_SECONDS = 60.0
HANG_STEP_FACTOR = 10.0
EXIT_HUNG = 3
ABORT_WAIT_BEATS = 3
"""How many beats an aborting worker waits for the others to find the hang (a dead or stopped
worker never says so)."""
ABORT_POLL_SECONDS = 0.05
MAX_HEARTBEAT_BYTES = 64 * 1024


def hang_limit(configured: str | float, call_seconds: float | None) -> float:
    """Seconds without a step's end that make a hang: the configured number, or "auto"."""
    if configured != "auto":
        return float(configured)
    if call_seconds is None:
        return HANG_MIN_SECONDS
    return max(HANG_MIN_SECONDS, HANG_STEP_FACTOR * call_seconds)


@dataclass(frozen=True)
class HangSettings:
    hang_seconds: str | float = "auto"
    on_hang: str = "warn"
    beat_seconds: float = BEAT_SECONDS
    lost_seconds: float | None = None
    """A peer whose heartbeat is older than this is lost (cluster.timeout_seconds); None: never."""


class Heartbeat:
    """Started by `run_job` around the training loop; the loop calls `step_ended` and `interval`."""

    def __init__(
        self,
        run_dir: Path,
        *,
        worker: int,
        workers: int,
        settings: HangSettings,
        probe: PhaseProbe | None = None,
        on_abort: Callable[[str, int], None] | None = None,
        is_chief: bool = True,
        publish: Callable[[dict[str, Any]], None] | None = None,
        exit_process: Callable[[int], Any] = os._exit,
    ) -> None:
        self.run_dir = run_dir
        self.worker, self.workers, self.settings = worker, workers, settings
        self.probe, self.on_abort, self.is_chief = probe, on_abort, is_chief
        self.publish = publish  # the chief's run.json `workers` writer
        self._exit = exit_process
        self._lock = threading.Lock()
        self._step: int | None = None
        self._step_time: float | None = None
        self._last_end: float | None = None  # monotonic
        self._armed: float | None = None  # monotonic: first seen in the reduction, no step yet
        self._calls: deque[float] = deque(maxlen=101)
        self._perf: dict[str, float] = {}
        self._best_compute: float | None = None
        self._window = PerfWindow()
        self._hung: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._entered = time.time()
        self._thread = threading.Thread(target=self._run, name="distagent-heartbeat", daemon=True)

    @property
    def path(self) -> Path:
        return self.run_dir / names.heartbeat_name(self.worker)

    def step_ended(self, step: int) -> None:
        """A compiled call ended at global step `step` (the loop's thread; no I/O here)."""
        now = time.monotonic()
        with self._lock:
            if self._last_end is not None:
                self._calls.append(now - self._last_end)
            self._step, self._step_time, self._last_end = step, time.time(), now
            if self._hung is not None:  # a slow step, not a hang: it ended
                self._hung = None

    def interval(self, step: int, scalars: Mapping[str, float], steps: int = 1) -> None:
        """A log interval's per-step means over its `steps` timed steps (this worker's own
        clock); the heartbeat carries them averaged over its last window (perf_window.py)."""
        compute = scalars.get(names.STEP_COMPUTE_SECONDS)
        wait = scalars.get(names.REDUCE_WAIT_SECONDS)
        step_ms = scalars.get(names.STEP_TIME_MS)
        if compute is None or wait is None or step_ms is None or \
                not all(math.isfinite(v) for v in (compute, wait, step_ms)):
            return
        timing = IntervalTiming(time.monotonic(), steps, step_ms / 1000.0, compute, wait)
        with self._lock:
            means = self._window.add(timing)
            if means is None:
                return
            if self._best_compute is None or means.compute_seconds < self._best_compute:
                self._best_compute = means.compute_seconds
            self._perf = {"step": step, "steps": means.steps,
                          "step_seconds": means.step_seconds,
                          "compute_seconds": means.compute_seconds,
                          "reduce_wait_seconds": means.reduce_wait_seconds,
                          "best_compute_seconds": self._best_compute}

    def record(self) -> dict[str, Any]:
        """This worker's heartbeat as written (also what the chief puts in run.json)."""
        with self._lock:
            call = statistics.median(self._calls) if self._calls else None
            out: dict[str, Any] = {
                "worker": self.worker, "host": socket.gethostname(), "pid": os.getpid(),
                "time": time.time(), "beat_seconds": self.settings.beat_seconds,
                "step": self._step, "step_time": self._step_time,
                "call_seconds": call,
                "hang_seconds": hang_limit(self.settings.hang_seconds, call),
                "perf": dict(self._perf) or None, "hung": self._hung,
            }
        if self.probe is not None:
            out.update(self.probe.latest())
        return out

    def beat(self) -> None:
        """One beat: look for a hang, write the heartbeat, and on the chief, run.json's copy."""
        self._check_hang()
        mine = self.record()
        write_json_whatever_the_disk(self.path, mine)
        if self.publish is not None and self.is_chief:
            self.publish(self._all_workers(mine))
        hung = mine.get("hung")
        if hung is not None and not self.is_chief:
            lost = self._lost_peer()
            if lost is not None:
                self._leave_lost(*lost, idle=time.time() - float(hung["since"]))
        if hung is not None and self.settings.on_hang == "abort":
            self._abort(hung, self._culprit(mine))

    def _lost_peer(self) -> tuple[int, float] | None:
        """(a peer, how old its heartbeat is) when one of this attempt stopped beating for
        longer than `lost_seconds`; None otherwise."""
        if self.settings.lost_seconds is None:
            return None
        now = time.time()
        for index, doc in self._peer_beats():
            when = doc.get("time")
            if isinstance(when, int | float) and not isinstance(when, bool) \
                    and when >= self._entered and now - when > self.settings.lost_seconds:
                return index, now - when
        return None

    def _peer_beats(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """The other workers' newest heartbeats, from their files, by index."""
        for index in range(self.workers):
            if index == self.worker:
                continue
            try:
                doc = load_json(self.run_dir / names.heartbeat_name(index), MAX_HEARTBEAT_BYTES)
            except (OSError, ValueError):
                continue  # not written yet, or mid-replace on a filesystem without atomicity
            if isinstance(doc, dict):
                yield index, doc

    def _leave_lost(self, peer: int, age: float, *, idle: float) -> None:
        from distagent.cluster.faults import RESTART_HINT

        print(f"distagent: worker {self.worker}: lost worker {peer}: its heartbeat stopped "
              f"{age:.0f} s ago and no step has ended for {idle:.0f} s (stopped or frozen); "
              f"{RESTART_HINT}", file=sys.stderr, flush=True)
        self._exit(1)
        self._stop.set()  # only reached where the exit does not end the process (tests)

    def _all_workers(self, mine: dict[str, Any]) -> dict[str, Any]:
        """Every worker's newest heartbeat (the others' from their files), by index."""
        found: dict[str, Any] = {str(self.worker): mine}
        found.update((str(index), doc) for index, doc in self._peer_beats())
        return found

    def _hang_clock(self, now: float) -> float | None:
        """Since when no step has ended: the last call's end; before the first, the moment
        this worker was first seen waiting in the reduction (its compilation is over then; a
        peer is not). None: not armed yet."""
        if self._last_end is not None:
            return self._last_end
        phase = self.probe.latest().get("phase") if self.probe is not None else None
        if phase == PHASE_REDUCING and self._armed is None:
            self._armed = now
        return self._armed

    def _check_hang(self) -> None:
        with self._lock:
            now = time.monotonic()
            start = self._hang_clock(now)
            if start is None or self._hung is not None:
                return
            call = statistics.median(self._calls) if self._calls else None
            limit = hang_limit(self.settings.hang_seconds, call)
            idle = now - start
            if idle < limit:
                return
            step = self._step
        stacks = self.run_dir / names.stacks_name(self.worker)
        where = f"after step {step}" if step is not None else "before the first step ended"
        header = (f"worker {self.worker} (pid {os.getpid()}): no step has ended for "
                  f"{idle:.0f} s (hang_seconds {limit:g}), {where}\n")
        written = self._dump_stacks(stacks, header)
        print(f"distagent: worker {self.worker}: no step has ended for {idle:.0f} s {where} "
              f"(hang_seconds {limit:g}); Python stacks "
              f"{f'in {stacks}' if written else 'above, on stderr'}",
              file=sys.stderr, flush=True)
        with self._lock:
            self._hung = {"since": time.time() - idle, "idle_seconds": idle,
                          "limit_seconds": limit, "step": step,
                          "stacks": stacks.name if written else None}

    def _dump_stacks(self, stacks: Path, header: str) -> bool:
        """Every thread's Python stacks into `stacks`, as a new file renamed onto the name (a
        link planted there is replaced, not followed; a FIFO is never opened, so it cannot
        block this thread, which must go on to abort). False: they went to stderr instead."""
        try:
            with atomic_file(stacks, 0o644) as out:
                out.write(header.encode("utf-8", "backslashreplace"))
                out.flush()
                faulthandler.dump_traceback(file=out, all_threads=True)
            return True
        except OSError as err:
            print(f"distagent: {stacks}: not written ({err.strerror or err})\n{header}",
                  file=sys.stderr, end="", flush=True)
        with contextlib.suppress(OSError, ValueError, AttributeError):  # no file descriptor
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        return False

    def _culprit(self, mine: dict[str, Any]) -> str:
        """Who holds the job, as distmon will say it ("worker 1 never reached the reduction"),
        from every worker's heartbeat; "" when nobody can be named (one worker, same phases)."""
        if not self.is_chief or self.workers < 2:
            return ""
        beats = worker_beats_from(self._all_workers(mine))
        culprits, _, why = hang_culprits(beats, time.time())
        if not culprits:
            return ""
        who = ", ".join(f"worker {b.worker}" for b in culprits)
        return f"{who}: {why}; "

    def _abort(self, hung: Mapping[str, Any], culprit: str = "") -> None:
        step = hung["step"]
        where = f"after step {step}" if step is not None else "before the first step ended"
        message = (f"{culprit}no step ended for {hung['limit_seconds']:g} s {where} "
                   f"(cluster.on_hang = \"abort\"); stacks "
                   f"{'in ' + hung['stacks'] if hung['stacks'] else 'on stderr'}")
        if self.on_abort is not None and self.is_chief:
            self.on_abort(message, int(hung["step"] or 0))
        print(f"distagent: worker {self.worker}: hung: {message}", file=sys.stderr, flush=True)
        self._await_peers_hung()
        self._exit(EXIT_HUNG)
        self._stop.set()  # only reached where the exit does not end the process (tests)

    def _await_peers_hung(self) -> None:
        """Until every other worker's heartbeat of this attempt says hung, or the bound."""
        deadline = time.monotonic() + ABORT_WAIT_BEATS * self.settings.beat_seconds
        waiting = [i for i in range(self.workers) if i != self.worker]
        while waiting and time.monotonic() < deadline:
            waiting = [i for i in waiting if not self._peer_hung(i)]
            if waiting:
                time.sleep(ABORT_POLL_SECONDS)

    def _peer_hung(self, index: int) -> bool:
        try:
            doc = load_json(self.run_dir / names.heartbeat_name(index), MAX_HEARTBEAT_BYTES)
        except (OSError, ValueError):
            return False
        if not isinstance(doc, dict) or not isinstance(doc.get("time"), (int, float)):
            return False
        # A heartbeat older than this one's start is an earlier attempt's.
        return doc.get("hung") is not None and doc["time"] >= self._entered

    def _run(self) -> None:
        said = None  # a problem is said once, not every beat while it lasts
        while not self._stop.wait(self.settings.beat_seconds):
            try:
                self.beat()
                said = None
            except Exception as err:  # a full disk must not end training nor the beats
                problem = str(err) if isinstance(err, StorageError) \
                    else f"{type(err).__name__}: {err}"
                if problem != said:
                    print(f"distagent: worker {self.worker}: heartbeat not written: {problem}",
                          file=sys.stderr, flush=True)
                said = problem

    def __enter__(self) -> Heartbeat:
        self._entered = time.time()
        if self.probe is not None:
            self.probe.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.probe is not None:
            self.probe.close()
        with contextlib.suppress(OSError, StorageError):  # the job's own end is what counts
            self.beat_final()

    def beat_final(self) -> None:
        """The last heartbeat, written as the job ends (no hang check: it ended); the chief's
        run.json keeps it too, so a job shorter than one beat still records its workers."""
        mine = self.record()
        write_json_whatever_the_disk(self.path, mine)
        if self.publish is not None and self.is_chief:
            self.publish(self._all_workers(mine))
