"""SystemRecorder writes real tf.summary events that TensorBoard's own reader reads back."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from distagent.system_record import SystemRecorder
from distcore import names
from distcore.telemetry import TelemetrySnapshot, TelemetrySource
from distcore.telemetry.host import PsutilHostReader
from distcore.telemetry.rapl import RaplReader
from distcore.telemetry.sampler import snapshot_metrics
from distcore.telemetry.simulated import SimulatedGpuSource
from tests.kit.wait import wait_until


def counting_clock() -> Any:
    """Each reading is one second later: sample k is taken at t = k, whatever the real time."""
    ticks = iter(range(10**6))
    return lambda: float(next(ticks))


class Recorded(TelemetrySource):
    """The real source, remembering what it handed out (to compare with the event file)."""

    def __init__(self) -> None:
        # Snapshot k is stamped t = k: the recorder's step (seconds since start) is then k.
        gpus = SimulatedGpuSource(2, clock=counting_clock())
        # No powercap: the host's tags are the same on a machine whose RAPL is readable.
        host = PsutilHostReader(rapl=RaplReader(Path("/nonexistent/powercap")))
        super().__init__(gpus, host, clock=counting_clock())
        self.handed_out: list[TelemetrySnapshot] = []
        self.closed = False

    def sample(self) -> TelemetrySnapshot:
        snap = super().sample()
        self.handed_out.append(snap)
        return snap

    def close(self) -> None:
        self.closed = True
        super().close()


def read_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    acc = ea.EventAccumulator(str(log_dir), size_guidance={ea.TENSORS: 0})
    acc.Reload()
    return {
        tag: [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]
        for tag in acc.Tags()["tensors"]
        if acc.SummaryMetadata(tag).plugin_data.plugin_name == "scalars"  # not the hparams
    }


def test_recorder_writes_system_scalars(tf: Any, tmp_path: Path) -> None:
    source = Recorded()
    recorder = SystemRecorder(tmp_path, interval=0.05, source=source)
    recorder.start()
    wait_until(lambda: recorder.written >= 3, "three samples written", 20)
    recorder.close()
    assert recorder.written >= 3
    assert not source.closed  # a source handed in belongs to the caller

    scalars = read_scalars(tmp_path / names.SYSTEM_DIR)
    expected_tags = {names.gpu_tag(i, f) for i in (0, 1)
                     for f in (*names.GPU_FIELDS, names.GPU_ENERGY)}  # simulated: a counter too
    assert set(scalars) == expected_tags | {names.HOST_CPU_PERCENT, names.HOST_MEMORY_USED_MIB}
    written = source.handed_out[: recorder.written]
    for tag, points in scalars.items():
        assert [step for step, _ in points] == list(range(len(written)))  # strictly increasing
        wanted = [snapshot_metrics(s, counters=True)[tag] for s in written]
        assert [v for _, v in points] == [float(tf.constant(w, tf.float32)) for w in wanted]
    source.close()


def test_unknown_values_leave_gaps_and_worker_subdirs(tf: Any, tmp_path: Path) -> None:
    class NoTemperature(TelemetrySource):
        def sample(self) -> TelemetrySnapshot:
            snap = super().sample()
            devices = tuple(replace(d, temperature_c=None) for d in snap.devices)
            return TelemetrySnapshot(snap.time, snap.status, devices, snap.host)

    source = NoTemperature(SimulatedGpuSource(1), None)
    subdir = names.worker_system_dir(1)
    recorder = SystemRecorder(tmp_path, interval=0.05, source=source, subdir=subdir)
    recorder.start()
    wait_until(lambda: recorder.written >= 2, "two samples written", 20)
    recorder.close()
    scalars = read_scalars(tmp_path / "system" / "worker-1")
    assert names.gpu_tag(0, "temperature_c") not in scalars  # unknown: not a zero
    assert len(scalars[names.gpu_tag(0, "utilization")]) >= 2


def test_unstarted_recorder_writes_nothing_and_closes_cleanly(tmp_path: Path) -> None:
    recorder = SystemRecorder(tmp_path)  # never started: no tensorflow needed
    recorder.close()
    assert not (tmp_path / names.SYSTEM_DIR).exists()


def test_resumed_recorder_continues_from_the_origin(tf: Any, tmp_path: Path) -> None:
    """A resumed job passes its first start as origin: steps go on from there, not from 0."""
    source = Recorded()  # snapshot k is stamped t = k
    recorder = SystemRecorder(tmp_path, interval=0.05, source=source, origin=-100.0)
    recorder.start()
    wait_until(lambda: recorder.written >= 2, "two samples written", 20)
    recorder.close()
    steps = [step for step, _ in read_scalars(tmp_path / names.SYSTEM_DIR)[names.HOST_CPU_PERCENT]]
    assert steps[:2] == [100, 101]
    source.close()
