"""Write telemetry samples as TensorBoard scalars into a job's `system` sub-run.

A remote worker's GPUs then show up for anyone watching the shared logdir, with no extra
service. The step of each point is whole seconds since the recorder started (monotonic,
strictly increasing), and its wall time is when it was written. Only known values are written:
an unsupported field leaves a gap, never a zero. It lives in the agent, the side that may
import TensorFlow (`start()` imports it, so `distagent plan` stays light).

Once per recorder, the run also gets the hparams `{"host": <hostname>, "worker": <index>}`
(worker absent for a single-worker job; `"simulated_gpus": N` added when the GPUs are simulated):
distmon labels each `system/` run's host with them.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distcore import names
from distcore.telemetry.sampler import TelemetrySampler, snapshot_metrics
from distcore.telemetry.samples import Source, TelemetrySnapshot
from distcore.telemetry.source import make_source


def recorder_hparams(
    host: str, worker: int | None, simulated_gpus: int = 0
) -> dict[str, str | int]:
    """What a system run says about where it was recorded: the host, the worker index (left
    out for a single worker) and, only when its GPUs are simulated, how many."""
    out: dict[str, str | int] = {"host": host}
    if worker is not None:
        out["worker"] = worker
    if simulated_gpus > 0:
        out["simulated_gpus"] = simulated_gpus
    return out


class SystemRecorder:
    """Samples every `interval` seconds and writes to `<run_dir>/<subdir>` (default `system`;
    multi-worker jobs pass `names.worker_system_dir(i)` and `worker=i`). Without `source` it
    samples this host's GPUs through NVML (or `simulate_gpus` simulated ones) plus the host and
    `pids`, and closes that source itself. Steps are whole seconds since `origin` (default: the
    first sample)."""

    def __init__(
        self,
        run_dir: Path,
        *,
        interval: float = 5.0,
        subdir: str = names.SYSTEM_DIR,
        source: Source | None = None,
        pids: Sequence[int] = (),
        origin: float | None = None,
        simulate_gpus: int = 0,
        worker: int | None = None,
        host: str | None = None,
    ) -> None:
        self.log_dir = Path(run_dir) / subdir
        self._interval = interval
        self._owns_source = source is None
        self._source: Source = (
            source if source is not None
            else make_source(pids=pids, simulate_gpus=simulate_gpus)
        )
        self.hparams = recorder_hparams(host if host is not None else socket.gethostname(),
                                        worker, simulate_gpus if source is None else 0)
        self._sampler: TelemetrySampler | None = None
        self._writer: Any = None
        self._tf: Any = None
        # Steps count seconds from `origin` (a wall time): a resumed job passes its first start,
        # so its samples continue the earlier session's instead of restarting at step 0, which
        # the readers' restart rule would take as a restart and drop the earlier points for.
        self._start: float | None = origin
        self._last_step = -1
        self.written = 0  # samples written, for tests and the agent's log

    def start(self) -> None:
        import tensorflow as tf

        self._tf = tf
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._writer = tf.summary.create_file_writer(str(self.log_dir))
        self._write_hparams()
        self._sampler = TelemetrySampler(
            self._source,
            interval=self._interval,
            history_seconds=self._interval,  # the event file is the history
            on_sample=self._write,
            close_source=self._owns_source,
        )
        self._sampler.start()

    def _write_hparams(self) -> None:
        from tensorboard.plugins.hparams import api as hp

        with self._writer.as_default():
            hp.hparams(dict(self.hparams))
        self._writer.flush()

    def _step(self, snap: TelemetrySnapshot) -> int:
        if self._start is None:
            self._start = snap.time
        step = max(self._last_step + 1, int(snap.time - self._start))
        self._last_step = step
        return step

    def _write(self, snap: TelemetrySnapshot) -> None:
        """Runs on the sampler thread; tf.summary's default writer is per thread, so each
        write enters the writer's context itself."""
        import numpy as np

        tf = self._tf
        step = self._step(snap)
        # numpy-backed tensors: TensorFlow keeps every Python number an eager op converts, so
        # Python floats here grew the agent by every sample for as long as it ran.
        with self._writer.as_default(step=tf.constant(np.int64(step))):
            for tag, value in snapshot_metrics(snap, counters=True).items():
                if value is not None:
                    tf.summary.scalar(tag, tf.constant(np.asarray(value, np.float32)))
        self._writer.flush()  # a watcher on another host sees the point within one interval
        self.written += 1

    def close(self) -> None:
        if self._sampler is not None:
            self._sampler.close()
        elif self._owns_source:
            self._source.close()
        if self._writer is not None:
            self._writer.close()
