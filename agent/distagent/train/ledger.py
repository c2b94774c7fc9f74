"""One worker's clock: where this attempt's seconds go, added to the job's earlier attempts.

The clock is in one state at a time (a bucket of distcore.jobs.ledger.BUCKETS, the steps, or
none) and `switch` charges the seconds since the last switch to the state it leaves, so no
second is counted twice. Seconds in no state are what `unknown` measures: the wall time less
every named bucket. The steps' seconds are split at each log point into `input_wait` (what the
compiled step measured it waited for its input) and `compute` (the rest).

Across attempts (run.json holds the state between them):
- `startup` runs from the process's start (psutil's create time) to the end of the first
  compiled call, less the checkpoint restore inside it.
- `scheduler`: the gap from the previous attempt's last record to this process's start, and on
  Slurm the time the job was pending (SubmitTime to StartTime, from `scontrol`).
- `lost`: after a crash, kill -9 or preemption, the work the previous attempt did after the
  checkpoint this attempt resumes from: its compute, input wait and evaluation since that
  checkpoint (the record holds them as they stood when the checkpoint was saved) move to lost,
  and so does the unknown that grew since (the log points' own writes, done again too).
- `recovery`: a rollback moves the work since the checkpoint it restores to recovery (its
  log points' writes too), and the rollback's own seconds.
No TensorFlow here; the clock is injected for the tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from distcore.bounded import bounded_float
from distcore.jobs.ledger import BUCKETS, TIME_PREFIX
from distcore.safefile import load_json, open_write

LEDGER_DIR: Final = "ledger"

STEPS: Final = "steps"
"""The state of compiled training calls: split into compute and input_wait at log points."""
REDONE: Final = ("compute", "input_wait", "evaluation")
"""The work a checkpoint keeps: done again (lost, or recovery) when the run goes back to it."""
SCONTROL_TIMEOUT_S: Final = 5.0


def _number(value: Any) -> float | None:
    """A number from the files an earlier attempt left (anyone may have written them)."""
    return bounded_float(value)


def carried(previous: Mapping[str, Any]) -> dict[str, float]:
    """The earlier attempts' buckets from run.json (unknown left out: it is measured again)."""
    raw = previous.get("ledger")
    raw = raw if isinstance(raw, dict) else {}
    out = {b: max(0.0, _number(raw.get(b)) or 0.0) for b in BUCKETS}
    out["unknown"] = 0.0
    return out


def lost_since(buckets: dict[str, float], mark: Any, resumed_step: int,
               unknown: float | None = None) -> float:
    """Move the work done after the checkpoint at `resumed_step` to nowhere and say how much:
    `mark` is run.json's `ledger_checkpoint` ({"step", "buckets"}), the buckets as they were
    when that checkpoint was saved. A mark of another step proves nothing: 0. `unknown` is
    the previous attempt's at its last record: what grew after the mark (the log points'
    own writes, done again too) is lost as well; `buckets` holds no unknown to take it from
    (it is measured again), so the next ledger's unknown is that much smaller."""
    if not isinstance(mark, dict) or mark.get("step") != resumed_step:
        return 0.0
    at = mark.get("buckets")
    at = at if isinstance(at, dict) else {}
    moved = 0.0
    for bucket in REDONE:
        then = _number(at.get(bucket))
        if then is None or then > buckets[bucket]:
            continue
        moved += buckets[bucket] - then
        buckets[bucket] = then
    then = _number(at.get("unknown"))
    if then is not None and unknown is not None:
        moved += max(0.0, unknown - then)
    return moved


class AttemptClock:
    """The ledger of one worker's attempt, and the job's so far (see the module's docstring)."""

    def __init__(
        self,
        previous: Mapping[str, Any] | None,
        *,
        process_start: float,
        pending_seconds: float | None = None,
        wall: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.perf_counter,
        path: Path | None = None,
    ) -> None:
        self._wall, self._clock = wall, clock
        self.path = path  # this worker's ledger file (worker_ledger_path), rewritten by save()
        now = wall()
        self._wall0, self._clock0 = now, clock()
        previous = previous or {}
        self.attempt_start = process_start
        last = _number(previous.get("ledger_time"))
        start = _number(previous.get("ledger_start"))
        self.buckets: dict[str, float] = dict.fromkeys(BUCKETS, 0.0)
        if last is not None and start is not None:  # a later attempt of the job
            self.buckets = carried(previous)
            self.job_start = min(start, process_start)
            self.buckets["scheduler"] += max(0.0, process_start - last)
        else:
            pending = max(0.0, pending_seconds or 0.0)
            self.job_start = process_start - pending
            self.buckets["scheduler"] += pending
        self._previous = previous
        self.buckets["startup"] += max(0.0, now - process_start)
        self._state: str | None = "startup"
        self._since = self._clock0
        self._steps = 0.0  # seconds of compiled calls not yet split at a log point
        self.mark: dict[str, Any] | None = None  # the buckets at the newest checkpoint
        self._file: LedgerFile | None = None

    def now(self) -> float:
        """Wall time by the monotonic clock (a wall clock set back mid-run moves nothing)."""
        return self._wall0 + (self._clock() - self._clock0)

    @property
    def state(self) -> str | None:
        return self._state

    def switch(self, state: str | None) -> str | None:
        """Charge the seconds since the last switch to the current state; `state` is next.
        Returns the state left."""
        t = self._clock()
        elapsed, self._since = t - self._since, t
        left, self._state = self._state, state
        if left == STEPS:
            self._steps += elapsed
        elif left is not None:
            self.buckets[left] += elapsed
        return left

    @contextlib.contextmanager
    def spent(self, bucket: str) -> Iterator[None]:
        """Charge the block's seconds to `bucket`, then go back to the state before it."""
        before = self.switch(bucket)
        try:
            yield
        finally:
            self.switch(before)

    def resumed(self, step: int) -> None:
        """This attempt restored the checkpoint at `step`: what came after it was lost."""
        last = self._previous.get("ledger")
        unknown = _number(last.get("unknown")) if isinstance(last, dict) else None
        self.buckets["lost"] += lost_since(self.buckets, self._previous.get("ledger_checkpoint"),
                                           step, unknown)
        self.mark = {"step": step, "time": self.now(), "buckets": self._redone()}

    def steps_logged(self, wait_seconds: float) -> None:
        """A log point read the steps' input wait: split the steps' seconds so far."""
        self.switch(self._state)
        wait = min(max(0.0, wait_seconds), self._steps)
        self.buckets["input_wait"] += wait
        self.buckets["compute"] += self._steps - wait
        self._steps = 0.0

    def checkpointed(self, step: int) -> None:
        """A checkpoint at `step` was saved: the point a later resume or rollback goes back to."""
        self.switch(self._state)
        self.mark = {"step": step, "time": self.now(), "buckets": self._redone()}

    def rolled_back(self, step: int) -> None:
        """Restored the checkpoint at `step` after a divergence: the work since it was saved
        (and the steps not yet logged) was done for nothing."""
        self.switch(self._state)
        at = (self.mark or {}).get("buckets") or {}
        then = at.get("unknown")
        if isinstance(then, float):  # the log points since the mark: undone too
            self.buckets["recovery"] += max(0.0, self._unknown() - then)
        self.buckets["recovery"] += self._steps
        self._steps = 0.0
        for bucket in REDONE:
            then = at.get(bucket)
            if isinstance(then, float) and then <= self.buckets[bucket]:
                self.buckets["recovery"] += self.buckets[bucket] - then
                self.buckets[bucket] = then
        self.mark = {"step": step, "time": self.now(), "buckets": self._redone()}

    def _redone(self) -> dict[str, float]:
        """What a later resume or rollback compares against: the work so far, and unknown."""
        out = {b: self.buckets[b] for b in REDONE}
        out["compute"] += self._steps  # not split yet: compute until a log point says
        out["unknown"] = self._unknown()
        return out

    def _unknown(self) -> float:
        """The seconds so far in no named state (the ledger's unknown), without a switch."""
        named = sum(v for b, v in self.buckets.items() if b != "unknown") + self._steps
        return self.now() - self.job_start - named

    def ledger(self) -> dict[str, float]:
        """{bucket: seconds} for the job so far; unknown = wall less the rest."""
        return self._ledger_now()[0]

    def _ledger_now(self) -> tuple[dict[str, float], float]:
        """The ledger and the time it stands at: one reading of the clock for both, so the
        buckets sum to the wall a record states (two readings were 12 ms apart under load)."""
        self.switch(self._state)
        out = dict(self.buckets)
        out["compute"] += self._steps
        now = self.now()
        out["unknown"] = now - self.job_start - sum(v for b, v in out.items() if b != "unknown")
        return out, now

    def record_fields(self) -> dict[str, Any]:
        """run.json's ledger fields: `ledger`, `goodput`, `ledger_wall`, and the state the next
        attempt reads (`ledger_start`, `ledger_time`, `ledger_checkpoint`)."""
        buckets, now = self._ledger_now()
        wall = now - self.job_start
        return {
            "ledger": {b: round(v, 6) for b, v in buckets.items()},
            "goodput": round(buckets["compute"] / wall, 6) if wall > 0 else None,
            "ledger_wall": round(wall, 6),
            "ledger_start": self.job_start,
            "ledger_attempt_start": self.attempt_start,
            "ledger_time": now,
            "ledger_checkpoint": self.mark,
        }

    def save(self, step: int | None = None) -> dict[str, Any]:
        """The record fields, written now to this worker's ledger file too (a kill -9 then
        loses at most the work since the last log point, not since run.json's last write), with
        the step they stand at (`ledger_step`)."""
        fields = {**self.record_fields(), "ledger_step": step}
        if self.path is not None:
            try:  # the ledger never stops training
                self._file = self._file or LedgerFile(self.path)
                self._file.write(fields)
            except OSError:
                self.path = None
        return fields

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def scalars(self) -> dict[str, float]:
        """The `time/<bucket>` scalars of a log point."""
        return {TIME_PREFIX + b: v for b, v in self.ledger().items()}


_SLURM_TIME = re.compile(r"\b(SubmitTime|StartTime)=(\S+)")


def slurm_pending(text: str) -> float | None:
    """Seconds between a job's SubmitTime and StartTime in `scontrol show job -o` output (its
    times are local, without a zone, as Slurm prints them); None when either is missing."""
    found = dict(_SLURM_TIME.findall(text))
    try:
        submit = datetime.fromisoformat(found["SubmitTime"]).timestamp()
        start = datetime.fromisoformat(found["StartTime"]).timestamp()
    except (KeyError, ValueError, OverflowError, OSError):
        return None
    return start - submit if start >= submit else None


def pending_seconds(environ: Mapping[str, str] = os.environ) -> float | None:
    """How long this Slurm job waited in the queue, where `scontrol` answers; else None."""
    job_id = environ.get("SLURM_JOB_ID", "")
    if not job_id.isdigit():
        return None
    try:
        done = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True,
                              text=True, timeout=SCONTROL_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return slurm_pending(done.stdout) if done.returncode == 0 else None


def process_start_time() -> float:
    """When this process started, in wall time, to the kernel's tick (10 ms): its age from
    /proc/self/stat against the boot clock. psutil's create_time rests on a boot time in whole
    seconds, up to a second off, more than a gap between two attempts."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        ticks = int(fields[19])  # starttime, the 22nd field; [0] here is the 3rd
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - max(0.0, age)
    except (OSError, ValueError, IndexError, AttributeError):
        import psutil

        return float(psutil.Process().create_time())


class LedgerFile:
    """A worker's ledger file, rewritten in place at every log point: one `pwrite` of the
    document padded with blanks to the file's length (JSON allows them), so no write ever
    leaves a shorter document followed by an older one's tail. A new file and `os.replace`
    each time cost milliseconds a log point; this costs microseconds. Only the next attempt
    reads it, once this process has ended; a torn file (the machine lost power) is not JSON and
    that attempt falls back on run.json."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = open_write(path, how="keep")  # no link, FIFO or device planted there
        self._size = os.fstat(self._fd).st_size

    def write(self, fields: Mapping[str, Any]) -> None:
        data = (json.dumps(fields, sort_keys=True) + "\n").encode()
        if len(data) < self._size:
            data += b" " * (self._size - len(data))
        os.pwrite(self._fd, data, 0)
        self._size = max(self._size, len(data))

    def close(self) -> None:
        os.close(self._fd)


def worker_ledger_path(run_dir: Path, task_index: int) -> Path:
    """`<run_dir>/ledger/worker-<i>.json`: each worker's own ledger, rewritten at log points."""
    return Path(run_dir) / LEDGER_DIR / f"worker-{task_index}.json"


def previous_attempts(run_dir: Path, task_index: int) -> dict[str, Any] | None:
    """The job's ledger as this worker's last attempt left it: its own ledger file (written at
    every log point; run.json is the chief's, at most once a second), over run.json's other
    fields; run.json alone where the file is missing or unreadable."""
    from distcore.jobs.agent import read_run_json

    record = read_run_json(run_dir)
    try:
        own = load_json(worker_ledger_path(run_dir, task_index), 1 << 20)
    except (OSError, ValueError):
        own = None
    if not isinstance(own, dict) or _number(own.get("ledger_time")) is None:
        return record
    return {**(record or {}), **own}


_PROCESS_IS_JOB = [False]


def claim_process() -> None:
    """This process exists to run the job (`distagent start`): its start-up counts from the
    process's start. Otherwise (a library call) from the call to run_job."""
    _PROCESS_IS_JOB[0] = True


def start_clock(run_dir: Path, checkpointer: Any, task_index: int = 0, *,
                entered: float | None = None) -> AttemptClock:
    """This attempt's clock, from the process's start (or `entered`, when run_job was called,
    in a process that did not `claim_process`): a later attempt of the job when there is a
    checkpoint to resume (its earlier attempts are in run.json and the ledger files), else a
    new job's (on Slurm, with the time it was pending)."""
    resuming = checkpointer.latest() is not None
    previous = previous_attempts(run_dir, task_index) if resuming else None
    pending = None if previous and previous.get("ledger_time") else pending_seconds()
    started = process_start_time()
    if not _PROCESS_IS_JOB[0] and entered is not None:
        started = max(started, entered)
    return AttemptClock(previous, process_start=started, pending_seconds=pending,
                        path=worker_ledger_path(run_dir, task_index))
