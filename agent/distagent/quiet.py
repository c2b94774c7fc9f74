"""A quiet start: TensorFlow's start-up noise kept off stderr; every other line passes through.

Measured on TF 2.21 without a GPU, `distagent plan` printed, before any output of its own:

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:... port.cc:153] oneDNN custom operations are on. ...
    I0000 00:00:... cudart_stub.cc:31] Could not find cuda drivers on your machine, ...
    E0000 00:00:... cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: ...

TF_CPP_MIN_LOG_LEVEL does not reach them: they are logged by C++ before absl's logging is
initialised, straight to file descriptor 2, where no Python setting applies. So fd 2 becomes a
pipe read by a forked filter process that drops those lines and forwards everything else (real
errors, tracebacks, TensorFlow's own later warnings) to the real stderr. A process, not a thread:
it outlives a crash of the agent (a C++ abort) and still forwards the last lines, and it ends
when every writer of the pipe has exited. `--verbose` skips all of this.

The same filter drops what TensorFlow prints once a worker ends a hung job itself: its peers'
leaving fails the collective it waited in, which says nothing the worker's own line did not.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import sys
import time

NOISE = (
    re.compile(rb"^WARNING: All log messages before absl::InitializeLog\(\) is called"),
    # INFO lines in absl's format (I<mmdd> <time> <thread> <file>:<line>]) never report errors.
    re.compile(rb"^I\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] "),
    # A CUDA probe on a machine without a GPU driver: not an error for a CPU run.
    re.compile(rb"^[EW]\d{4} [^\]]*\] failed call to cuInit"),
    re.compile(rb"^[EW]\d{4} [^\]]*\] Unable to register cu(DNN|FFT|BLAS) factory"),
    re.compile(rb"^[EW]\d{4} [^\]]*\] TF-TRT Warning: Could not find TensorRT"),
)
"""Start-up lines that read as errors to a new user and are not."""


ABORTING = re.compile(rb"^distagent: worker \d+: hung: ")
"""The worker's own line as it ends a hung job (train/heartbeat.py)."""
ABORT_ECHO = (
    re.compile(rb"^[EW]\d{4} [^\]]*\] .*(Socket closed|StartAbort|Aborting \w+Reduce"
               rb"|UNAVAILABLE|CANCELLED|[Cc]oordination)"),
    re.compile(rb"^Additional GRPC error information from remote target "),
    re.compile(rb"^:UNKNOWN:Error received from peer "),
)
"""What TensorFlow prints in a worker whose peer left first, once its own abort is under way:
the collective it was waiting in failing ("Aborting RingReduce with UNAVAILABLE: Socket closed"
and gRPC's two lines of detail), six lines under the one that says what happened."""


def is_noise(line: bytes) -> bool:
    return any(pattern.search(line) for pattern in NOISE)


class LineFilter:
    """Which lines of fd 2 reach the terminal: never the start-up noise; after this worker's
    own `hung:` line, not the echo of its peers' leaving."""

    def __init__(self) -> None:
        self.aborting = False

    def keep(self, line: bytes) -> bool:
        if is_noise(line) or (self.aborting and any(p.search(line) for p in ABORT_ECHO)):
            return False
        if ABORTING.search(line):
            self.aborting = True
        return True


def _pump(read_fd: int, out_fd: int) -> None:
    """The filter process: forward every line it keeps, until end of file."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # the agent decides; this process ends at EOF
    kept = LineFilter()
    with io.open(read_fd, "rb", closefd=True) as pipe:  # noqa: UP020 - an fd, not a path
        for line in pipe:
            if kept.keep(line):
                with contextlib.suppress(OSError):
                    os.write(out_fd, line)


FILTER_PID_ENV = "_DISTAGENT_STDERR_FILTERED_PID"
"""Set to the pid whose fd 2 is filtered: `distagent start` re-executes itself (same pid, same
descriptors), and the re-executed program finds its stderr already filtered."""


class QuietStderr:
    """Route this process's fd 2 through a forked filter; `close()` restores it and waits for
    the filter to forward what is left (briefly: children may still hold the pipe)."""

    def __init__(self) -> None:
        self._saved: int | None = None
        self._child: int | None = None

    @staticmethod
    def inherited() -> bool:
        """Whether this very process (before an exec) already filters its stderr."""
        return os.environ.get(FILTER_PID_ENV) == str(os.getpid())

    def start(self) -> QuietStderr:
        sys.stderr.flush()
        os.environ[FILTER_PID_ENV] = str(os.getpid())
        read_fd, write_fd = os.pipe()
        saved = os.dup(2)
        child = os.fork()
        if child == 0:  # the filter: holds nothing of the agent's but the pipe and stderr
            os.close(write_fd)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)  # a caller reading our stdout to its end must not wait for us
            try:
                _pump(read_fd, saved)
            finally:
                os._exit(0)
        os.close(read_fd)
        os.dup2(write_fd, 2)
        os.close(write_fd)
        self._saved, self._child = saved, child
        return self

    def close(self, wait_seconds: float = 1.0) -> None:
        if self._saved is None or self._child is None:
            return
        with contextlib.suppress(ValueError, OSError):
            sys.stderr.flush()
        os.dup2(self._saved, 2)  # our write end of the pipe closes here
        os.close(self._saved)
        os.environ.pop(FILTER_PID_ENV, None)
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline:
            pid, _ = os.waitpid(self._child, os.WNOHANG)
            if pid:
                break
            time.sleep(0.01)
        self._saved = self._child = None
