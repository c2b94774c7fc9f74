"""A remote host's GPUs: ONE long-running `nvidia-smi --query-gpu=... -lms <ms>` over the host's
shared SSH connection, its CSV lines parsed into the same `GpuDevice`s as local GPUs; beside it
one `nvidia-smi dmon --gpm-metrics` (remote/dmon.py) for the GPM figures the query cannot give.

nvidia-smi prints one line per GPU per tick; each line replaces that GPU's figures, so no
grouping into ticks is needed. "[N/A]", "[Not Supported]" and friends are None, never 0. Fields
nvidia-smi's query cannot give (PCIe throughput, per-process command lines) are None / empty.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import IO, Final

from distcore.jobs.snapshots import Host
from distcore.producer import Failing, Loop, ProducerError
from distcore.remote.dmon import NO_GPM, dmon_command, has_figures, header_columns, parse_row
from distcore.remote.ssh import SshConnection, SshUnreachable
from distcore.telemetry.gpm import GpmValues
from distcore.telemetry.samples import GpuDevice
from distcore.textsafe import terminal_text

QUERY: Final = (
    "index", "name", "uuid", "utilization.gpu", "utilization.memory", "memory.used",
    "memory.total", "temperature.gpu", "power.draw", "power.limit", "clocks.sm", "fan.speed",
)  # fmt: skip
NOT_FOUND_EXIT: Final = 127
NOT_FOUND_RETRY: Final = 60.0  # no nvidia-smi there: asked again only after a while
MAX_BACKOFF: Final = 30.0
GPM_RETRY: Final = 600.0  # a host whose dmon gives no GPM (before Hopper) is asked again rarely


class SmiStopped(Exception):
    """nvidia-smi's stream ended (it should run until closed); the host's GPU reason."""


def command(interval_ms: int) -> str:
    return (
        f"exec nvidia-smi --query-gpu={','.join(QUERY)} --format=csv,noheader,nounits"
        f" -lms {max(100, int(interval_ms))}"
    )


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None  # [N/A], [Not Supported], [Unknown Error], [GPU is lost], ...
    return value if value == value and abs(value) != float("inf") else None


def _text(text: str) -> str | None:
    return None if not text or text.startswith("[") else text


def parse_line(line: str) -> GpuDevice | None:
    """One CSV line of the query above; None for anything else (a banner, an error line)."""
    cells = [c.strip() for c in line.split(",")]
    if len(cells) != len(QUERY) or not cells[0].isdigit():
        return None
    util, util_mem, mem_used, mem_total, temp, power, limit, clock, fan = map(_number, cells[3:])
    return GpuDevice(
        index=int(cells[0]), name=_text(cells[1]), uuid=_text(cells[2]),
        utilization_gpu=util, utilization_memory=util_mem,
        memory_used_mib=mem_used, memory_total_mib=mem_total,
        temperature_c=temp, power_w=power, power_limit_w=limit, sm_clock_mhz=clock,
        fan_percent=fan, pcie_rx_kib_s=None, pcie_tx_kib_s=None, processes=(),
    )  # fmt: skip


def _with_gpm(device: GpuDevice, values: GpmValues | None) -> GpuDevice:
    if values is None:
        return device
    return replace(device, sm_activity=values["sm_activity"],
                   sm_occupancy=values["sm_occupancy"],
                   tensor_activity=values["tensor_activity"],
                   dram_bandwidth=values["dram_bandwidth"])  # fmt: skip


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
            gpus = tuple(_with_gpm(self._gpus[i], self._gpm.get(i)) for i in sorted(self._gpus))
            sampled_at, reason, gpm_reason = self._sampled_at, self._reason, self._gpm_reason
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
            ),
        )

    def errors(self) -> tuple[ProducerError, ...]:
        # nvidia-smi's own states and the connection's are the host's (the logdir reader
        # reports the connection once); only a failure of this code is an error here.
        return self._failing.errors()

    def sample_once(self, timeout: float = 30.0) -> None:
        """One sample (for `--once`): the same query without -lms."""
        if not self._sample:
            return
        try:
            result = self._conn.run(command(0).split(" -lms")[0], timeout=timeout)
        except SshUnreachable as err:
            self._set_reason(f"unreachable ({err})")
            return
        for line in result.stdout.decode("utf-8", "replace").splitlines():
            self._take(line)
        if result.returncode != 0:
            self._set_reason(self._exit_reason(result.returncode, result.stderr))

    # --- the sampling thread -------------------------------------------------------------------
    def _stream(self) -> None:
        """The loop's step: one nvidia-smi, read until it ends; raises why it ended."""
        try:
            proc = self._conn.popen(command(int(self._interval * 1000)))
        except SshUnreachable as err:
            raise SmiStopped(f"unreachable ({err})") from err
        self._proc = proc
        assert proc.stdout is not None and proc.stderr is not None
        streamed = self._read(proc.stdout)
        code = proc.wait()
        stderr = proc.stderr.read().decode("utf-8", "replace")
        proc.stdout.close()
        proc.stderr.close()
        if self._loop.stopping:
            return
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

    def _read(self, stream: IO[bytes]) -> bool:
        """Take the stream's lines until it ends; whether any was a GPU's."""
        streamed = False
        for raw in stream:
            streamed |= self._take(raw.decode("utf-8", "replace"))
        return streamed

    def _take(self, line: str) -> bool:
        device = parse_line(line)
        if device is None:
            return False
        with self._lock:
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
            self._reason = reason

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
        assert proc.stdout is not None and proc.stderr is not None
        streamed = self._read_gpm(proc)
        code = proc.wait()
        stderr = proc.stderr.read().decode("utf-8", "replace")
        proc.stdout.close()
        proc.stderr.close()
        with self._lock:
            self._gpm.clear()
            self._no_gpm.clear()
            if not streamed and code not in (0, NOT_FOUND_EXIT) and self._gpm_reason is None:
                self._gpm_reason = self._dmon_refused(code, stderr)  # an older driver's dmon
        self._gpm_loop.next_in(self._interval if streamed else GPM_RETRY)

    def _read_gpm(self, proc: subprocess.Popen[bytes]) -> bool:
        """Take dmon's rows until it ends; whether one had GPM figures. A stream of "-" alone
        (no GPU with GPM) is stopped: its reason is said, and it is asked again rarely."""
        assert proc.stdout is not None
        columns: int | None = None
        streamed = False
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace")
            columns = header_columns(line) or columns
            row = parse_row(line, columns)
            if row is None:
                continue
            if not self._take_gpm(*row):
                self._kill(proc)
                return streamed
            streamed |= has_figures(row[1])
        return streamed

    def _take_gpm(self, index: int, values: GpmValues) -> bool:
        """Keep one GPU's GPM figures; False once every GPU the query stream knows has none."""
        with self._lock:
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

    def _dmon_refused(self, code: int, stderr: str) -> str:
        last = [ln for ln in stderr.splitlines() if ln.strip()]
        detail = terminal_text(last[-1], 160) if last else f"exit status {code}"
        return f"nvidia-smi dmon on {self._label} gives no GPM ({detail})"

    def _gpm_failed(self, err: Exception) -> None:
        if isinstance(err, SmiStopped):  # the host's error line says it
            return
        line = terminal_text(f"{type(err).__name__}: {err}", 200)
        with self._lock:
            self._gpm_reason = f"GPM sampling failed: {line}"
        self._failing.fail(f"{self._label}: GPM sampling failed: {line}", self._clock())
