"""A fixed-rate sampler thread with a bounded ring-buffer history per metric.

The loop (distcore.producer.Loop) is drift-free (`next += interval`, on a grid from the first
tick): a slow tick does not push later ones back, and after a long stall (a suspended laptop, a
hung NVML call) missed ticks are skipped instead of fired in a burst. History keeps
`history_seconds / interval` points per metric in `deque(maxlen=...)`, so memory is bounded
however long it runs.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping

from distcore import names
from distcore.errors import descriptor_shortage
from distcore.producer import Failing, Loop, ProducerError
from distcore.producer import next_deadline as next_deadline
from distcore.telemetry.samples import GpuStatus, Source, TelemetrySnapshot

log = logging.getLogger(__name__)

# names.GPU_FIELDS -> the GpuDevice attribute that holds it.
GPU_FIELD_ATTRS: Mapping[str, str] = {
    "utilization": "utilization_gpu",
    "memory_used_mib": "memory_used_mib",
    "power_w": "power_w",
    "temperature_c": "temperature_c",
}


def snapshot_metrics(snap: TelemetrySnapshot, *, counters: bool = False
                     ) -> dict[str, float | None]:
    """The history / recorder metrics of one snapshot, keyed by their names in distcore.names.
    `counters`: the energy counters too, where known (the recorder's: a job's energy is read
    from them; no sparkline draws one, so the history keeps none)."""
    metrics: dict[str, float | None] = {}
    for device in snap.devices:
        for field, attr in GPU_FIELD_ATTRS.items():
            metrics[names.gpu_tag(device.index, field)] = getattr(device, attr)
        for field in names.GPM_FIELDS:  # before Hopper never known: no series kept for them
            value = getattr(device, field)
            if value is not None:
                metrics[names.gpu_tag(device.index, field)] = value
        if counters and device.energy_joules is not None:  # before Volta never known
            metrics[names.gpu_tag(device.index, names.GPU_ENERGY)] = device.energy_joules
    if snap.host is not None:
        metrics[names.HOST_CPU_PERCENT] = snap.host.cpu_percent
        metrics[names.HOST_MEMORY_USED_MIB] = snap.host.memory_used_mib
        if counters and snap.host.energy_joules is not None:
            metrics[names.HOST_ENERGY_JOULES] = snap.host.energy_joules
    return metrics


class History:
    """Aligned ring buffers: `times()` and every series have one entry per sample (None where a
    metric was absent), at most `capacity` each. A series absent for a whole window is dropped,
    so unplugged devices do not hold memory either. Not thread-safe by itself."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._times: deque[float] = deque(maxlen=capacity)
        self._series: dict[str, deque[float | None]] = {}

    def append(self, when: float, values: Mapping[str, float | None]) -> None:
        self._times.append(when)
        for key in [*self._series.keys(), *(k for k in values if k not in self._series)]:
            series = self._series.get(key)
            if series is None:
                padding = [None] * (len(self._times) - 1)
                series = self._series[key] = deque(padding, maxlen=self.capacity)
            series.append(values.get(key))
            if key not in values and all(v is None for v in series):
                del self._series[key]

    def get(self, key: str) -> tuple[float | None, ...]:
        return tuple(self._series.get(key, ()))

    def times(self) -> tuple[float, ...]:
        return tuple(self._times)

    def keys(self) -> tuple[str, ...]:
        return tuple(sorted(self._series))


def failure_text(err: Exception) -> str:
    """One line for a failed sample, the same all the while a cause lasts."""
    return f"sampling failed: {descriptor_shortage(err) or err}"


class TelemetrySampler:
    """Samples `source` every `interval` seconds on its own thread.

    `clock` times the loop (monotonic); each snapshot carries the source's wall time. `wait`
    (tests) replaces the stop-event wait: it gets the seconds to wait and returns True to stop.
    The sampler owns the source: `close()` closes it too unless `close_source=False`.
    """

    def __init__(
        self,
        source: Source,
        *,
        interval: float = 1.0,
        history_seconds: float = 600,
        clock: Callable[[], float] = time.monotonic,
        on_sample: Callable[[TelemetrySnapshot], None] | None = None,
        wait: Callable[[float], bool] | None = None,
        close_source: bool = True,
    ) -> None:
        if interval <= 0 or history_seconds <= 0:
            raise ValueError("interval and history_seconds must be positive")
        self.interval = interval
        self._source = source
        self._clock = clock
        self._on_sample = on_sample
        self._close_source = close_source
        self._lock = threading.Lock()
        self._history = History(max(1, math.ceil(history_seconds / interval)))
        self._latest: TelemetrySnapshot | None = None
        self._failing = Failing("telemetry")
        self._loop = Loop("telemetry-sampler", self.sample_once, interval=interval, clock=clock,
                          wait=wait)
        self.samples = 0
        self._failures = 0  # in a row

    def _log_failure(self, err: Exception) -> None:
        """The failure reaches the user as this sampler's ProducerError (one line, shown once
        while it lasts); the log gets its traceback once per failing stretch, not per sample.
        An OSError (out of descriptors, /proc unreadable) is the machine's state, no bug: its
        traceback only at debug level."""
        if self._failures or isinstance(err, OSError):
            log.debug("telemetry source failed", exc_info=True)
        else:
            log.exception("telemetry source failed")

    def sample_once(self) -> TelemetrySnapshot:
        """One tick, synchronously: sample, record, notify."""
        try:
            snap = self._source.sample()
        except Exception as err:  # a source bug must not kill the dashboard's only sampler
            self._log_failure(err)
            message = failure_text(err)
            failed = GpuStatus(False, message, False, "error")
            snap = TelemetrySnapshot(time.time(), failed, (), None)
            self._failing.fail(message, snap.time)
            self._failures += 1
        else:
            self._failing.ok()
            self._failures = 0
        with self._lock:
            self._latest = snap
            self._history.append(snap.time, snapshot_metrics(snap))
            self.samples += 1
        if self._on_sample is not None:
            try:
                self._on_sample(snap)
            except Exception:
                log.exception("telemetry on_sample callback failed")
        return snap

    def start(self) -> None:
        self._loop.start()

    def close(self) -> None:
        """Stop the thread (it wakes at once from its wait) and release the source."""
        # Bounded: a hung NVML call must not hang the app's exit; the thread is a daemon.
        self._loop.close(timeout=self.interval + 5.0)
        if self._close_source:
            self._source.close()

    def errors(self) -> tuple[ProducerError, ...]:
        """The current failure of the source (none once a sample succeeds again)."""
        return self._failing.errors()

    def problems(self) -> tuple[str, ...]:
        return ()

    def latest(self) -> TelemetrySnapshot | None:
        with self._lock:
            return self._latest

    def history(self, key: str) -> tuple[float | None, ...]:
        with self._lock:
            return self._history.get(key)

    def history_times(self) -> tuple[float, ...]:
        """Wall times of the kept samples, aligned with every `history(key)`."""
        with self._lock:
            return self._history.times()

    def history_keys(self) -> tuple[str, ...]:
        with self._lock:
            return self._history.keys()

    @property
    def capacity(self) -> int:
        return self._history.capacity


def keys_for(indices: Iterable[int], *, host: bool = True) -> tuple[str, ...]:
    """All history keys for these GPU indices, plus the host's."""
    gpu = [names.gpu_tag(i, f) for i in indices for f in names.GPU_FIELDS]
    return (*gpu, names.HOST_CPU_PERCENT, names.HOST_MEMORY_USED_MIB) if host else tuple(gpu)
