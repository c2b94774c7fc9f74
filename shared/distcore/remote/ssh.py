"""One shared SSH connection per host, through the system `ssh` (the user's config, keys, agent,
jump hosts all apply; `--ssh-config` is `-F`).

The connection is an OpenSSH ControlMaster whose socket lives in a private temporary directory.
Its own session is a POSIX `sh` reading commands from our pipe: `run()` (refreshes, reads,
`--once` samples) writes one command line there and reads its output up to a marker with a
fresh random token and the exit status, so a refresh costs no process here and no login shell
there (no ssh client per command, no rc files read again: with 100 hosts this is what keeps
distmon's share of a core small). The long-running nvidia-smi is a session multiplexed over the
socket. When distmon goes away, however it ends, the shell's stdin closes and the master exits.
A command never falls back to a connection of its own (ProxyCommand=false after the mux). A lost
connection is re-made with backoff; `error_line()` says since when it is unreachable and why.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import select
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from distcore.process import find_command, stop_child
from distcore.textsafe import terminal_text

READY: Final = b"distmon-ready"
BACKOFF_FIRST: Final = 1.0
BACKOFF_MAX: Final = 30.0
# ssh's keepalive: a request sent after this many seconds without a word from the server, the
# connection given up after ALIVE_COUNT unanswered ones (a host that stops answering is shown
# unreachable within 15-20 s). Any answer (a refresh's) resets ssh's timer, so a host refreshed
# each second sends none; a quiet host (refreshed every 10 s at most) about one per refresh.
# Every 2 s, as before, cost 100 quiet hosts 50 round trips a second, more than their refreshes.
ALIVE_INTERVAL: Final = 5
ALIVE_COUNT: Final = 3
# Handshakes in flight at once, over all hosts: sshd's MaxStartups (default 10:30:100) drops
# unauthenticated connections beyond 10, and 100 key exchanges at once starve a small machine.
MAX_HANDSHAKES: Final = 8
_HANDSHAKES = threading.BoundedSemaphore(MAX_HANDSHAKES)
# A Unix socket path holds at most 108 bytes and ssh adds ~17 while it sets the socket up.
MAX_SOCKET_DIR: Final = 80
_PLAIN_PATH: Final = re.compile(r"/[A-Za-z0-9/._-]*")
_NOISE: Final = ("Warning: Permanently added", "debug", "Pseudo-terminal")


MAX_ANSWER_BYTES: Final = 64 << 20
"""What one command on the shell session may print unless its caller allows more (a logdir's
listing at this size names about half a million files). Beyond it the host is refused and the
session dropped, so the rest is never read."""


class SshUnreachable(Exception):
    """The host cannot be reached now; str() is the reason in one line."""


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: bytes
    stderr: str


def ssh_reason(stderr: str, fallback: str = "connection closed") -> str:
    """The line of ssh's stderr that says what went wrong, without ssh's own prefixes."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(_NOISE)]
    if not lines:
        return fallback
    line = lines[-1].removeprefix("ssh: ")
    return terminal_text(line.rstrip("."), 200)


def control_dir() -> str:
    """A new private (0700) directory for the master's socket whose path ssh takes as it is:
    short enough for a Unix socket (108 bytes, of which ssh uses ~17 while it sets the socket
    up) and without blanks or `%` (ssh splits option values on blanks and expands `%` tokens).
    $TMPDIR where it qualifies, else $XDG_RUNTIME_DIR or /tmp (mkdtemp's random name is
    created exclusively, so a shared /tmp is safe)."""
    candidates = [tempfile.gettempdir(), os.environ.get("XDG_RUNTIME_DIR") or "", "/tmp"]
    for parent in dict.fromkeys(c for c in candidates if c):
        if not _PLAIN_PATH.fullmatch(parent) or len(parent) + 16 > MAX_SOCKET_DIR:
            continue
        with contextlib.suppress(OSError):
            return tempfile.mkdtemp(prefix="distmon-", dir=parent)
    raise SshUnreachable("no temporary directory with a short plain path for ssh's socket")


def size_text(size: int) -> str:
    """`64 MiB`, `300 KiB`: a byte count as a cap is said."""
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def clock_text(when: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(when))


class SshConnection:
    def __init__(
        self,
        destination: str,
        *,
        ssh_config: Path | None = None,
        connect_timeout: float = 10.0,
        ssh: str = "ssh",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.destination = destination
        self._config = ssh_config
        self._connect_timeout = connect_timeout
        self._ssh = ssh
        self._client = ssh  # the absolute path that runs, found at each connect
        self._clock = clock
        self._lock = threading.Lock()  # the state below; never held over a handshake
        self._connecting = threading.Lock()
        self._dir: str | None = None
        self._master: subprocess.Popen[bytes] | None = None
        self._down_since: float | None = None
        self._reason: str | None = None
        self._next_try = 0.0
        self._backoff = BACKOFF_FIRST
        self.connects = 0  # successful connections (tests check reconnects)
        self.bytes_received = 0  # every command's output: listings, headers and data (bench)
        self._closed = False
        self._channel = threading.Lock()  # one command at a time on the shell session
        self._buffer = bytearray()  # what the shell printed past the last marker (nothing)

    # --- state ---------------------------------------------------------------------------------
    def error_line(self) -> str | None:
        """'host unreachable since 12:03:04 (Connection refused)', or None while connected."""
        with self._lock:
            if self._down_since is None:
                return None
            return f"unreachable since {clock_text(self._down_since)} ({self._reason})"

    @property
    def down_since(self) -> float | None:
        return self._down_since

    # --- commands ------------------------------------------------------------------------------
    def run(self, command: str, timeout: float = 60.0, limit: int = MAX_ANSWER_BYTES) -> Result:
        """Run `command` on the connection's shell session (in a subshell, stdin and stderr
        closed); SshUnreachable if there is none, or if it prints more than `limit` bytes
        (the host is refused: the session is dropped). One command at a time per host."""
        with self._channel:
            self.ensure()
            master = self._master
            if master is None or master.stdin is None or master.stdout is None:
                raise SshUnreachable(self._reason or "not connected")
            token = secrets.token_hex(16)
            line = f"( {command}\n) </dev/null 2>/dev/null; printf '\\n{token} %s\\n' $?\n"
            try:
                master.stdin.write(line.encode("utf-8", "surrogateescape"))
                master.stdin.flush()
            except (OSError, ValueError) as err:  # the master died (or is closing) under us
                self._lost("connection closed")
                raise SshUnreachable("connection closed") from err
            returncode, out = self._read_answer(master, token.encode(), timeout, limit)
        self.bytes_received += len(out)
        return Result(returncode, out, "")

    def _read_answer(
        self, master: subprocess.Popen[bytes], token: bytes, timeout: float, limit: int
    ) -> tuple[int, bytes]:
        """The command's output, up to `\n<token> <status>\n` (the token is fresh and secret:
        nothing a file holds can end a command early)."""
        assert master.stdout is not None
        fd, buf = master.stdout.fileno(), self._buffer
        marker = b"\n" + token + b" "
        deadline, searched = time.monotonic() + timeout, 0
        while True:
            at = buf.find(marker, searched)
            if at >= 0:
                end = buf.find(b"\n", at + len(marker))
                if end >= 0:
                    status = bytes(buf[at + len(marker) : end])
                    out = bytes(buf[:at])
                    del buf[: end + 1]
                    return (int(status) if status.isdigit() else 255), out
            searched = max(0, len(buf) - len(marker) - 8)
            left = deadline - time.monotonic()
            if left <= 0 or self._closed:
                reason = f"no answer within {timeout:.0f} s" if left <= 0 else "closed"
                self._lost(reason)
                raise SshUnreachable(reason)
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    buf.clear()
                    self._lost("connection closed")
                    raise SshUnreachable(self._reason or "connection closed")
                buf += chunk
                if len(buf) > limit + len(marker) + 24:  # the marker and a status fit beyond
                    buf.clear()
                    reason = f"refused: an answer over {size_text(limit)}"
                    self._lost(reason)
                    raise SshUnreachable(reason)

    def popen(self, command: str) -> subprocess.Popen[bytes]:
        """A long-running command over the shared connection (stdout piped)."""
        self.ensure()
        return subprocess.Popen(
            self._client_argv(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def ensure(self) -> None:
        """Connect if not connected, at most once per backoff period. The handshake runs
        outside the state lock: error_line() and hosts() never wait for a slow host."""
        with self._connecting:  # one handshake at a time for this host
            with self._lock:
                if self._alive():
                    return
                if self._closed:
                    raise SshUnreachable("closed")
                if self._master is not None:  # it was up and died
                    self._mark_down(self._master_reason())
                if self._clock() < self._next_try:
                    raise SshUnreachable(self._reason or "not connected")
            try:
                self._connect()
            except SshUnreachable as err:
                with self._lock:
                    self._mark_down(str(err))
                    self._next_try = self._clock() + self._backoff
                    self._backoff = min(BACKOFF_MAX, self._backoff * 2)
                raise
            with self._lock:
                self._down_since, self._reason = None, None
                self._backoff, self.connects = BACKOFF_FIRST, self.connects + 1

    def interrupt(self) -> None:
        """Stop waiting: a handshake in progress (or queued for its turn) gives up at once, and
        no command starts any more. Lock-free, so a thread stuck connecting is reached."""
        self._closed = True

    def stop_soon(self) -> None:
        """Ask the master to end (stdin closed, SIGTERM) without waiting: closing 100 hosts
        one wait after another would take seconds; close() then reaps it."""
        self.interrupt()
        master = self._master
        if master is not None and master.poll() is None:
            with contextlib.suppress(OSError):
                if master.stdin is not None:
                    master.stdin.close()
                master.terminate()

    def close(self) -> None:
        self.interrupt()
        with self._connecting, self._lock:
            self._stop_master()
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None

    # --- internals -----------------------------------------------------------------------------
    def _base_argv(self) -> list[str]:
        argv = [self._client]
        if self._config is not None:
            argv += ["-F", str(self._config)]
        assert self._dir is not None
        return [
            *argv,
            "-o", f"ControlPath={self._dir}/m",
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={max(1, round(self._connect_timeout))}",
            # A RemoteCommand or RequestTTY in the user's config would clash with ours.
            "-o", "RemoteCommand=none",
        ]  # fmt: skip

    def _client_argv(self, command: str) -> list[str]:
        if self._dir is None:
            raise SshUnreachable("not connected")
        return [
            *self._base_argv(),
            "-o", "ControlMaster=no",
            "-o", "ProxyCommand=false",  # never a second connection when the master is gone
            "-T", "--", self.destination, command,
        ]  # fmt: skip

    def _connect(self) -> None:
        self._stop_master()
        # Found again at each connect (an ssh installed meanwhile is used), by absolute path
        # only: a `./ssh` planted in a logdir that is the working directory never runs.
        client = find_command(self._ssh)
        if client is None:
            raise SshUnreachable(f"no {terminal_text(self._ssh, 100)} on PATH's absolute "
                                 "directories: install OpenSSH's client")
        self._client = client
        if self._dir is None:
            self._dir = control_dir()  # 0700: the socket is private
        err_path = Path(self._dir) / "master.err"
        argv = [
            *self._base_argv(),
            "-o", "ControlMaster=yes",
            "-o", "ControlPersist=no",
            "-o", f"ServerAliveInterval={ALIVE_INTERVAL}",
            "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
            "-o", "ClearAllForwardings=yes",  # no port opened, whatever the config forwards
            # Whatever the login shell: it runs this line once, then sh reads our commands.
            "-T", "--", self.destination, f"echo {READY.decode()}; exec /bin/sh",
        ]  # fmt: skip
        while not _HANDSHAKES.acquire(timeout=0.1):  # a slow host holds one slot only
            if self._closed:
                raise SshUnreachable("closed")
        try:
            try:
                with open(err_path, "wb") as err:
                    self._master = subprocess.Popen(
                        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
                    )
            except OSError as err:  # removed since it was found, or not a program
                raise SshUnreachable(f"cannot run {client}: {err.strerror}") from err
            ready = self._wait_ready(self._master)
        finally:
            _HANDSHAKES.release()
        if not ready:
            with contextlib.suppress(subprocess.TimeoutExpired):
                if not self._closed:
                    self._master.wait(timeout=2)  # its stdout closes just before it exits
            reason = self._master_reason()
            self._stop_master()
            raise SshUnreachable(reason)

    def _wait_ready(self, master: subprocess.Popen[bytes]) -> bool:
        assert master.stdout is not None
        deadline = time.monotonic() + self._connect_timeout + 5
        seen = b""
        while time.monotonic() < deadline and not self._closed:
            ready, _, _ = select.select([master.stdout], [], [], 0.1)
            if ready:
                chunk = os.read(master.stdout.fileno(), 256)
                if not chunk:
                    return False
                seen += chunk
                if READY + b"\n" in seen:  # what follows (nothing, normally) is the shell's
                    self._buffer = bytearray(seen.partition(READY + b"\n")[2])
                    return True
            elif master.poll() is not None:
                return False
        return False

    def _master_reason(self) -> str:
        if self._dir is None:
            return "not connected"
        if self._master is not None and self._master.poll() is None:
            return "no answer"
        try:
            text = (Path(self._dir) / "master.err").read_text("utf-8", "replace")
        except OSError:
            text = ""
        return ssh_reason(text)

    def _alive(self) -> bool:
        return self._master is not None and self._master.poll() is None and self._down_since is None

    def _lost(self, reason: str) -> None:
        with self._lock:
            if self._master is not None and self._master.poll() is not None:
                reason = self._master_reason()  # the master's own words are the better ones
            # A master still running has not noticed a dead peer yet: start afresh.
            self._stop_master()
            self._mark_down(reason)

    def _mark_down(self, reason: str) -> None:
        if self._down_since is None:
            self._down_since = self._clock()
        self._reason = reason

    def _stop_master(self) -> None:
        master, self._master = self._master, None
        if master is None:
            return
        if master.stdin is not None:
            master.stdin.close()
        stop_child(master, timeout=5)
        if master.stdout is not None:
            master.stdout.close()


def posix_script(script: str, args: Sequence[str]) -> str:
    """A remote command line that runs `script` under /bin/sh with `args`, whatever the login
    shell: everything is single-quoted, so nothing from a path is ever interpreted."""
    import shlex

    return " ".join(["sh", "-c", shlex.quote(script), "sh", *(shlex.quote(a) for a in args)])
