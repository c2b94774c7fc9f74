"""A remote host's GPUs: ONE long-running `nvidia-smi --query-gpu=... -lms <ms>` over the host's
shared SSH connection, its CSV lines parsed into the same `GpuDevice`s as local GPUs; beside it
one `nvidia-smi dmon --gpm-metrics` (remote/dmon.py) for the GPM figures the query cannot give.
The query's lines are parsed in smi_query.py.

nvidia-smi prints one line per GPU per tick; each line replaces that GPU's figures, so no
grouping into ticks is needed. What it sends is capped (remote/bounds.py): a host over a cap
reads "refused: <why>", its commands are stopped and it is not sampled again.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from typing import Final

from distcore.jobs.snapshots import Host
from distcore.producer import Failing, Loop, ProducerError
from distcore.remote.bounds import (
    Allowance,
    BoundedLines,
    Refused,
    finish,
    gpu_cap,
    read_tail,
    refused_reason,
)
from distcore.remote.dmon import NO_GPM, DmonLines, dmon_command, has_figures
from distcore.remote.smi_query import command, parse_line, with_gpm
from distcore.remote.ssh import SshConnection, SshUnreachable
from distcore.telemetry.gpm import GpmValues
from distcore.telemetry.samples import GpuDevice
from distcore.textsafe import terminal_text

NOT_FOUND_EXIT: Final = 127
NOT_FOUND_RETRY: Final = 60.0  # no nvidia-smi there: asked again only after a while
MAX_BACKOFF: Final = 30.0
GPM_RETRY: Final = 600.0  # a host whose dmon gives no GPM (before Hopper) is asked again rarely
# `--once`: dmon's 1 s ticks, two of them (a GPU whose first row has no figures has a second),
# waited for at most that long and ONCE_GPM_GRACE seconds more (its start, a slow shell).
ONCE_GPM_TICKS: Final = 2
ONCE_GPM_GRACE: Final = 2.0
ONCE_GPM_WAIT: Final = ONCE_GPM_TICKS * 1.0 + ONCE_GPM_GRACE
STDERR_WAIT: Final = 5.0  # seconds a command's stderr is read for after its stdout ended


class SmiStopped(Exception):
    """nvidia-smi's stream ended (it should run until closed); the host's GPU reason."""


class SshGpuSource:
    """A `HostSource`: the GPUs of one host over its shared connection (source "ssh")."""

    def __init__(
        self,
        connection: SshConnection,
        label: str,
        *,
        interval: float = 1.0,
        clock: Callable[[], float] = time.time,
        sample: bool = True,
    ) -> None:
        self._conn = connection
        self._sample = sample  # False (--no-gpu): the host is listed, nvidia-smi never run
        self._label = label
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._gpus: dict[int, GpuDevice] = {}
        self._sampled_at: float | None = None
        self._reason: str | None = "connecting" if sample else "not sampled (--no-gpu)"
        # One step is one nvidia-smi process, for as long as it streams; its end is a failure
        # (shown as the host's GPU reason), and the next one backs off.
        self._failing = Failing(f"ssh-gpus:{label}")
        self._loop = Loop(f"distmon-ssh-gpus-{label}", self._stream, interval=interval,
                          on_error=self._failed, max_backoff=MAX_BACKOFF)
        self._proc: subprocess.Popen[bytes] | None = None
        # GPM: its own dmon stream, merged into the GPUs by index; why there is none, once.
        self._gpm: dict[int, GpmValues] = {}
        self._no_gpm: set[int] = set()
        self._gpm_reason: str | None = None
        self._gpm_loop = Loop(f"distmon-ssh-gpm-{label}", self._gpm_stream, interval=interval,
                              on_error=self._gpm_failed, max_backoff=MAX_BACKOFF)
        self._gpm_proc: subprocess.Popen[bytes] | None = None
        self._refused = False  # over a cap once: never sampled again

    def start(self) -> None:
        if not self._loop.started and self._sample:
            self._loop.start()
            self._gpm_loop.start()

    def close(self) -> None:
        self._loop.stop()
        self._gpm_loop.stop()
        self._conn.interrupt()
        self._kill(self._proc)
        self._kill(self._gpm_proc)
        self._loop.join(10)
        self._gpm_loop.join(10)

    def hosts(self) -> tuple[Host, ...]:
        with self._lock:
            gpus = tuple(with_gpm(self._gpus[i], self._gpm.get(i)) for i in sorted(self._gpus))
            sampled_at, reason, gpm_reason = self._sampled_at, self._reason, self._gpm_reason
            refused = self._refused
        return (
            Host(
                key=f"ssh:{self._label}",
                name=self._label,
                source="ssh",
                sampled_at=sampled_at,
                gpus=gpus,
                gpu_reason=reason,
                error=self._conn.error_line(),
                gpm_reason=gpm_reason,
                refused=refused,
            ),
        )

    def errors(self) -> tuple[ProducerError, ...]:
        # nvidia-smi's own states and the connection's are the host's (the logdir reader
        # reports the connection once); only a failure of this code is an error here.
        return self._failing.errors()

    def sample_once(self, timeout: float = 30.0) -> None:
        """One sample (for `--once`): the same query without -lms and, started first, a dmon
        of ONCE_GPM_TICKS ticks, read until every GPU the query found has GPM figures, dmon
        ends, or ONCE_GPM_WAIT seconds after it started: GPM figures or why there are none."""
        if not self._sample:
            return
        dmon = self._start_once_dmon()
        deadline = time.monotonic() + ONCE_GPM_WAIT
        queried = False
        try:
            queried = self._query_once(timeout)
        finally:
            if dmon is not None:
                self._once_gpm(dmon, deadline if queried and not self._refused else None)

    def _query_once(self, timeout: float) -> bool:
        """The query without -lms, its answer capped as one sample; whether the host
        answered it."""
        try:
            proc = self._conn.popen(command(0).split(" -lms")[0])
        except SshUnreachable as err:
            self._set_reason(f"unreachable ({err})")
            return False
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        try:
            for line in BoundedLines(proc.stdout.fileno(), Allowance(None), deadline=deadline):
                self._take(line)
        except Refused as err:
            self._refuse(err)
            finish(proc, 0.0)
            return True
        late = time.monotonic() >= deadline
        code, stderr = finish(proc, max(0.0, deadline - time.monotonic()))
        if late:
            self._set_reason(f"nvidia-smi on {self._label} gave no answer within {timeout:.0f} s")
        elif code != 0:
            self._set_reason(self._exit_reason(code, stderr))
        return True

    # --- the sampling thread -------------------------------------------------------------------
    def _stream(self) -> None:
        """The loop's step: one nvidia-smi, read until it ends; raises why it ended."""
        try:
            proc = self._conn.popen(command(int(self._interval * 1000)))
        except SshUnreachable as err:
            raise SmiStopped(f"unreachable ({err})") from err
        self._proc = proc
        assert proc.stdout is not None
        try:
            streamed = self._read(proc.stdout.fileno())
        except Refused as err:
            self._refuse(err)
            finish(proc, 0.0)
            return
        if self._loop.stopping:  # closed: its stderr is no one's news
            finish(proc, 0.0)
            return
        code, stderr = finish(proc, STDERR_WAIT)
        reason = self._exit_reason(code, stderr)
        self._failing.ok()
        if streamed:  # it ran, then ended (a driver reload): again in an interval, no backoff
            self._set_reason(reason)  # (not at once: the old one may still be exiting there)
            self._loop.next_in(self._interval)
            return
        if code == NOT_FOUND_EXIT:
            self._loop.next_in(NOT_FOUND_RETRY)
        raise SmiStopped(reason)

    def _failed(self, err: Exception) -> None:
        """Never die silently: the host says why it has no figures, then it starts again."""
        if isinstance(err, SmiStopped):
            self._set_reason(str(err))
            return
        line = terminal_text(f"{type(err).__name__}: {err}", 200)
        self._set_reason(line)
        self._failing.fail(f"{self._label}: GPU sampling failed: {line}", self._clock())

    def _read(self, fd: int) -> bool:
        """Take the stream's lines until it ends; whether any was a GPU's. Refused where it
        sends more than the caps allow."""
        streamed = False
        for line in BoundedLines(fd, Allowance(self._interval)):
            streamed |= self._take(line)
        return streamed

    def _take(self, line: str) -> bool:
        device = parse_line(line)
        if device is None:
            return False
        with self._lock:
            if self._refused:
                return False
            gpu_cap(len(self._gpus), device.index not in self._gpus)
            self._gpus[device.index] = device
            self._sampled_at = self._clock()
            self._reason = None
        return True

    def _exit_reason(self, code: int, stderr: str) -> str:
        if code == NOT_FOUND_EXIT:
            return f"nvidia-smi not found on {self._label}"
        last = [ln for ln in stderr.splitlines() if ln.strip()]
        detail = terminal_text(last[-1], 160) if last else f"exit status {code}"
        return f"nvidia-smi on {self._label} stopped: {detail}"

    def _set_reason(self, reason: str) -> None:
        with self._lock:
            if not self._refused:
                self._reason = reason

    def _refuse(self, err: Refused) -> None:
        """Over a cap: the host's figures are dropped, both its commands stopped, and its
        sampling ends for good, so that it costs nothing more; its reason says why."""
        with self._lock:
            self._refused = True
            self._gpus.clear()
            self._sampled_at = None
            self._gpm.clear()
            self._no_gpm.clear()
            self._reason = refused_reason(err)
            self._gpm_reason = None
        self._loop.stop()
        self._gpm_loop.stop()
        self._kill(self._proc)
        self._kill(self._gpm_proc)

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes] | None) -> None:
        if proc is not None and proc.poll() is None:
            proc.terminate()

    # --- the GPM thread ------------------------------------------------------------------------
    def _gpm_stream(self) -> None:
        """The GPM loop's step: one dmon, read until it ends, or stopped once it shows that no
        GPU there has GPM; then asked again in an interval (it streamed) or GPM_RETRY."""
        try:
            proc = self._conn.popen(dmon_command(self._interval))
        except SshUnreachable as err:  # the query stream says so; this one backs off
            raise SmiStopped(f"unreachable ({err})") from err
        self._gpm_proc = proc
        assert proc.stdout is not None
        lines = DmonLines()
        try:
            streamed = self._read_gpm(proc, lines)
        except Refused as err:
            self._refuse(err)
            finish(proc, 0.0)
            return
        code, stderr = finish(proc, 0.0 if self._gpm_loop.stopping else STDERR_WAIT)
        with self._lock:
            if self._refused:
                return
            self._gpm.clear()
            self._no_gpm.clear()
            if not streamed and code not in (0, NOT_FOUND_EXIT) and self._gpm_reason is None:
                self._gpm_reason = self._dmon_refused(code, stderr, lines.other)  # no GPM flag
        self._gpm_loop.next_in(self._interval if streamed else GPM_RETRY)

    def _read_gpm(self, proc: subprocess.Popen[bytes], lines: DmonLines) -> bool:
        """Take dmon's rows until it ends; whether one had GPM figures. A stream of "-" alone
        (no GPU with GPM) is stopped: its reason is said, and it is asked again rarely."""
        assert proc.stdout is not None
        streamed = False
        for line in BoundedLines(proc.stdout.fileno(), Allowance(self._interval)):
            row = lines.feed(line)
            if row is None:
                continue
            if not self._take_gpm(*row):
                self._kill(proc)
                return streamed
            streamed |= has_figures(row[1])
        return streamed

    # --- --once's dmon -------------------------------------------------------------------------
    def _start_once_dmon(self) -> subprocess.Popen[bytes] | None:
        try:
            return self._conn.popen(dmon_command(1.0, ONCE_GPM_TICKS))
        except SshUnreachable:  # the query says so
            return None

    def _once_gpm(self, proc: subprocess.Popen[bytes], deadline: float | None) -> None:
        """dmon's rows taken until every GPU has figures, dmon ends or `deadline` (monotonic)
        passes. Rows without figures say why (_take_gpm); no row at all says it here. None:
        the query failed, and its reason says why."""
        assert proc.stdout is not None and proc.stderr is not None
        lines, rows = DmonLines(), 0
        refused: Refused | None = None
        if deadline is not None:
            try:
                rows = self._once_rows(proc.stdout.fileno(), lines, deadline)
            except Refused as err:
                refused = err
        code = None
        if deadline is not None and not rows and refused is None:
            code = self._ended(proc, deadline)
        # The shared connection's master holds a stopped client's pipes until the remote
        # command ends (a tick later): they are closed unread, not waited for.
        stderr = b""
        if code is not None:
            stderr = read_tail(proc.stderr.fileno(), time.monotonic() + STDERR_WAIT)
        self._kill(proc)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        if refused is not None:
            self._refuse(refused)
        if deadline is None or rows or code == NOT_FOUND_EXIT or refused is not None:
            return
        with self._lock:
            if code is None:
                self._gpm_reason = (f"nvidia-smi dmon on {self._label} printed no row within"
                                    f" {ONCE_GPM_WAIT:.0f} s")  # fmt: skip
            else:
                self._gpm_reason = self._dmon_refused(
                    code, stderr.decode("utf-8", "replace"), lines.other)

    def _once_rows(self, fd: int, lines: DmonLines, deadline: float) -> int:
        """dmon's rows taken (one sample's worth at most) until every GPU has figures, dmon
        ends or `deadline` passes; how many."""
        rows = 0
        for line in BoundedLines(fd, Allowance(None), deadline=deadline,
                                 done=self._gpm_complete):
            row = lines.feed(line)
            if row is not None:
                self._take_gpm(*row)
                rows += 1
        return rows

    @staticmethod
    def _ended(proc: subprocess.Popen[bytes], deadline: float) -> int | None:
        """Its exit status once it ends by `deadline`; None if it runs on."""
        try:
            return proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return None

    def _gpm_complete(self) -> bool:
        with self._lock:
            return bool(self._gpus) and self._gpm.keys() >= self._gpus.keys()

    def _take_gpm(self, index: int, values: GpmValues) -> bool:
        """Keep one GPU's GPM figures; False once every GPU the query stream knows has none."""
        with self._lock:
            if self._refused:
                return False
            gpu_cap(len(self._gpm.keys() | self._no_gpm),
                    index not in self._gpm and index not in self._no_gpm)
            if has_figures(values):
                self._gpm[index] = values
                self._no_gpm.discard(index)
            else:
                self._gpm.pop(index, None)
                self._no_gpm.add(index)
            lacking = sorted(self._no_gpm)
            everyone = bool(self._gpus) and self._no_gpm >= set(self._gpus)
            if everyone:
                self._gpm_reason = f"{NO_GPM} on {self._label}"
            elif lacking:
                gpus = ", ".join(str(i) for i in lacking)
                self._gpm_reason = f"{NO_GPM} for GPU {gpus} on {self._label}"
            else:
                self._gpm_reason = None
        return not everyone

    def _dmon_refused(self, code: int, stderr: str, other: str | None) -> str:
        """Why dmon gave no row: its last stderr line, else the last other line of its stdout
        (nvidia-smi prints "ERROR: Option --gpm-metrics is not recognized..." there)."""
        last = [ln for ln in stderr.splitlines() if ln.strip()]
        said = last[-1] if last else other
        detail = terminal_text(said, 160) if said else f"exit status {code}" if code else "no rows"
        return f"nvidia-smi dmon on {self._label} gives no GPM ({detail})"

    def _gpm_failed(self, err: Exception) -> None:
        if isinstance(err, SmiStopped):  # the host's error line says it
            return
        line = terminal_text(f"{type(err).__name__}: {err}", 200)
        with self._lock:
            self._gpm_reason = f"GPM sampling failed: {line}"
        self._failing.fail(f"{self._label}: GPM sampling failed: {line}", self._clock())
