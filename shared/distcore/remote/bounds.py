"""What a remote host's GPU commands may send: caps on a line, a sample and a host's GPUs.

A host's nvidia-smi is another machine's program: it may print a gigabyte without a newline,
report two million GPUs, or stream faster than any GPU ticks. Each of those is a cap here, and a
host over one is refused: its GPU panel reads "refused: <why>" and its sampling stops, so that
it costs nothing more. The caps are far above what any real host prints (a query line is about
200 bytes, a dmon row about 120, one line per GPU per sample):

- MAX_LINE_BYTES: one line (a longer one is refused before it is kept whole).
- MAX_GPUS: GPUs per host (an HGX board has 8 or 16; a rack's GPUs are spread over its hosts).
- MAX_SAMPLE_LINES and MAX_SAMPLE_BYTES: one sample (`--once`'s whole answer), and on a stream
  the average per sample interval, with BURST_SAMPLES samples' worth at once (a reader that
  fell behind on a loaded machine finds several samples waiting in the pipe).

`BoundedLines` reads a pipe with bounded reads (never a readline without a limit); `finish`
ends a command keeping only the tail of its stderr, read for a bounded time.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Final

MAX_LINE_BYTES: Final = 64 << 10
MAX_GPUS: Final = 64
MAX_SAMPLE_LINES: Final = 4 * MAX_GPUS
MAX_SAMPLE_BYTES: Final = 1 << 20
BURST_SAMPLES: Final = 8
READ_BYTES: Final = 64 << 10  # one os.read


class Refused(Exception):
    """The host sent more than a cap allows; str() says which, for "refused: <why>"."""


def refused_reason(err: Refused) -> str:
    return f"refused: {err}"


def gpu_cap(known: int, new: bool) -> None:
    """Refused when one GPU more than MAX_GPUS would be kept for a host."""
    if new and known >= MAX_GPUS:
        raise Refused(f"more than {MAX_GPUS} GPUs on one host")


class Allowance:
    """Lines and bytes a source may still send: one sample's worth (`interval` None: one
    answer), or on a stream one sample's worth more every `interval` seconds of `clock`
    (monotonic), holding at most BURST_SAMPLES samples' worth."""

    def __init__(self, interval: float | None, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self._interval = interval
        self._clock = clock
        burst = 1 if interval is None else BURST_SAMPLES
        self._most = (float(burst * MAX_SAMPLE_LINES), float(burst * MAX_SAMPLE_BYTES))
        self._lines, self._bytes = self._most
        self._at = clock()

    def take(self, lines: int, size: int) -> None:
        """Spend `lines` lines and `size` bytes; Refused when more than allowed."""
        if self._interval is not None:
            now = self._clock()
            earned = max(0.0, now - self._at) / max(self._interval, 1e-3)
            self._at = now
            self._lines = min(self._most[0], self._lines + earned * MAX_SAMPLE_LINES)
            self._bytes = min(self._most[1], self._bytes + earned * MAX_SAMPLE_BYTES)
        self._lines -= lines
        self._bytes -= size
        per = "per sample" if self._interval is None else "per sample interval"
        if self._lines < 0:
            raise Refused(f"more than {MAX_SAMPLE_LINES} lines {per}")
        if self._bytes < 0:
            raise Refused(f"more than {MAX_SAMPLE_BYTES >> 10} KiB {per}")


class BoundedLines:
    """The lines of a pipe, decoded, as they come: bounded reads, each line checked against
    MAX_LINE_BYTES before it is kept whole and against the allowance. Ends when the pipe
    ends, after `done()` is true, or (with `deadline`, monotonic) when it passes. Iterating
    raises Refused where a cap is crossed; the caller stops the command."""

    def __init__(self, fd: int, allowance: Allowance, *, deadline: float | None = None,
                 done: Callable[[], bool] = lambda: False) -> None:
        self._fd, self._allowance = fd, allowance
        self._deadline, self._done = deadline, done

    def __iter__(self) -> Iterator[str]:
        pending = b""
        while not self._done():
            chunk = self._read()
            if not chunk:
                if pending:
                    self._allowance.take(1, len(pending))
                    yield pending.decode("utf-8", "replace")
                return
            *whole, pending = (pending + chunk).split(b"\n")
            if len(pending) > MAX_LINE_BYTES or any(len(w) > MAX_LINE_BYTES for w in whole):
                raise Refused(f"a line longer than {MAX_LINE_BYTES >> 10} KiB")
            for line in whole:
                self._allowance.take(1, len(line) + 1)
                yield line.decode("utf-8", "replace")
                if self._done():
                    return

    def _read(self) -> bytes:
        """The next bytes; b"" at the end of the pipe or once the deadline passed."""
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0 or not select.select([self._fd], [], [], left)[0]:
                return b""
        return os.read(self._fd, READ_BYTES)


def read_tail(fd: int, deadline: float, keep: int = 4096) -> bytes:
    """The last `keep` bytes a pipe sends until it ends or the monotonic `deadline` passes
    (a command's stderr, read after its stdout ended: only its last lines say why)."""
    tail = b""
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, READ_BYTES)
        if not chunk:
            break
        tail = (tail + chunk)[-keep:]
    return tail


def finish(proc: subprocess.Popen[bytes], wait: float) -> tuple[int, str]:
    """A command's exit status and the tail of its stderr, read for at most `wait` seconds
    (it is killed if it runs on); its pipes closed."""
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + wait
    stderr = read_tail(proc.stderr.fileno(), deadline).decode("utf-8", "replace")
    try:
        code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    return code, stderr
