"""The sampler: drift-free fixed rate, bounded aligned history, immutable snapshots, quick close."""

from __future__ import annotations

import dataclasses
import gc
import threading
import time

import pytest

from distcore import names
from distcore.telemetry import GpuDevice, GpuStatus, TelemetrySnapshot, TelemetrySource
from distcore.telemetry.sampler import History, TelemetrySampler, keys_for, next_deadline
from distcore.telemetry.simulated import SimulatedGpuSource
from tests.kit.wait import wait_until


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowSource:
    """Simulated GPUs whose sampling takes `cost` seconds of the fake clock."""

    def __init__(self, clock: FakeClock, gpus: int = 2, cost: float = 0.3) -> None:
        self.clock, self.cost = clock, cost
        self.inner = TelemetrySource(SimulatedGpuSource(gpus, clock=clock), None, clock=clock)
        self.started_at: list[float] = []
        self.closed = False

    def sample(self) -> TelemetrySnapshot:
        self.started_at.append(self.clock.now)
        snap = self.inner.sample()
        self.clock.now += self.cost
        return snap

    def close(self) -> None:
        self.closed = True


def run_fake(source: SlowSource, clock: FakeClock, ticks: int, **kwargs: object) -> list[float]:
    """Runs the real loop thread on fake time; returns the waits it asked for."""
    waits: list[float] = []

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        clock.now += seconds
        return len(waits) >= ticks

    sampler = TelemetrySampler(source, clock=clock, wait=wait, **kwargs)  # type: ignore[arg-type]
    sampler.start()
    sampler._loop.join(5.0)
    sampler.close()
    return waits


@pytest.mark.parametrize(
    ("deadline", "now", "interval", "expected"),
    [
        (10.0, 10.3, 1.0, 11.0),  # on time: next grid point
        (10.0, 10.999, 1.0, 11.0),
        (10.0, 11.0, 1.0, 12.0),  # exactly one interval late: skip the due one
        (10.0, 12.5, 1.0, 13.0),  # stalled 2.5 s: no burst, back on the grid
        (0.0, 0.05, 0.5, 0.5),
    ],
)
def test_next_deadline(deadline: float, now: float, interval: float, expected: float) -> None:
    assert next_deadline(deadline, now, interval) == pytest.approx(expected)


def test_rate_is_drift_free_despite_slow_ticks() -> None:
    clock = FakeClock()
    source = SlowSource(clock, cost=0.3)
    waits = run_fake(source, clock, ticks=20, interval=1.0)
    assert source.started_at == pytest.approx([float(i) for i in range(20)])
    assert waits == pytest.approx([0.7] * 20)
    assert source.closed


def test_a_stalled_tick_skips_missed_ones() -> None:
    clock = FakeClock()
    source = SlowSource(clock, cost=2.5)
    run_fake(source, clock, ticks=3, interval=1.0)
    assert source.started_at == pytest.approx([0.0, 3.0, 6.0])


def test_history_length_and_alignment_with_fake_time() -> None:
    clock = FakeClock()
    source = SlowSource(clock, gpus=2, cost=0.0)
    sampler = TelemetrySampler(source, interval=1.0, history_seconds=30, clock=clock)
    for _ in range(100):
        sampler.sample_once()
        clock.now += 1.0
    assert sampler.capacity == 30 and sampler.samples == 100
    assert sampler.history_times() == tuple(float(t) for t in range(70, 100))
    assert set(sampler.history_keys()) == set(keys_for([0, 1], host=False))
    util = sampler.history(names.gpu_tag(1, "utilization"))
    assert len(util) == 30 and all(v is not None for v in util)
    assert util[-1] == sampler.latest().devices[1].utilization_gpu  # type: ignore[union-attr]
    assert sampler.history("gpu/9/utilization") == ()
    sampler.close()


def test_default_history_holds_ten_minutes_at_one_second() -> None:
    sampler = TelemetrySampler(SlowSource(FakeClock()))
    assert sampler.capacity * sampler.interval >= 600
    sampler.close()


def test_history_pads_new_series_and_drops_vanished_ones() -> None:
    history = History(capacity=3)
    history.append(1.0, {"a": 1.0})
    history.append(2.0, {"a": 2.0, "b": 5.0})
    assert history.get("b") == (None, 5.0)
    history.append(3.0, {"a": 3.0})
    history.append(4.0, {"a": 4.0})
    assert history.get("b") == (5.0, None, None)
    history.append(5.0, {"a": 5.0})
    assert history.keys() == ("a",) and history.get("a") == (3.0, 4.0, 5.0)
    history.append(6.0, {"a": None})  # still reported, value unknown: kept
    assert history.get("a") == (4.0, 5.0, None)


def _live() -> tuple[int, int]:
    """(snapshots, devices) alive now."""
    gc.collect()
    objects = gc.get_objects()
    return (
        sum(1 for o in objects if isinstance(o, TelemetrySnapshot)),
        sum(1 for o in objects if isinstance(o, GpuDevice)),
    )


def test_memory_is_bounded() -> None:
    # Counted in objects, not tracemalloc bytes: CPython's free lists keep freed tuples and
    # floats allocated, which would read as growth.
    snapshots, devices = _live()  # other tests' leftovers
    clock = FakeClock()
    sampler = TelemetrySampler(SlowSource(clock, gpus=8, cost=0.0), history_seconds=60, clock=clock)
    for _ in range(400):
        sampler.sample_once()
        clock.now += 1.0
    keys = keys_for(range(8), host=False)
    snapshots_after, devices_after = _live()
    assert snapshots_after - snapshots == 1  # latest() only; the history keeps plain floats
    assert devices_after - devices == 8
    assert sampler.history_keys() == tuple(sorted(keys))
    assert all(len(sampler.history(k)) == 60 for k in keys)
    assert len(sampler.history_times()) == 60
    sampler.close()


def test_snapshots_are_immutable() -> None:
    clock = FakeClock()
    sampler = TelemetrySampler(SlowSource(clock), clock=clock)
    snap = sampler.sample_once()
    sampler.close()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.devices[0].utilization_gpu = 0.0  # type: ignore[misc]
    assert isinstance(snap.devices, tuple) and isinstance(snap.devices[0].processes, tuple)


def test_real_thread_samples_and_close_is_prompt() -> None:
    seen = threading.Event()
    source = TelemetrySource(SimulatedGpuSource(1), None)
    sampler = TelemetrySampler(source, interval=30.0, on_sample=lambda _: seen.set())
    sampler.start()
    assert seen.wait(10.0)
    started = time.monotonic()
    sampler.close()
    assert time.monotonic() - started < 15.0  # far less than the 30 s interval
    assert not any(t.name == "telemetry-sampler" for t in threading.enumerate())


def test_real_thread_keeps_its_rate() -> None:
    source = TelemetrySource(SimulatedGpuSource(1), None)
    sampler = TelemetrySampler(source, interval=0.02)
    started = time.monotonic()
    sampler.start()
    # a loaded machine may lose ticks
    wait_until(lambda: sampler.samples >= 3, "three samples", started + 60 - time.monotonic())
    time.sleep(0.2)  # a few intervals more: the upper bound has something to bound
    sampler.close()
    ran = time.monotonic() - started
    # A fixed rate never fires more than once per interval (plus the tick at zero); a loaded
    # 2-core machine may make it lose ticks, so the lower bound is loose.
    assert 3 <= sampler.samples <= ran / 0.02 + 1
    times = sampler.history_times()
    assert list(times) == sorted(times)


def test_failing_source_and_callback_do_not_stop_the_loop() -> None:
    class Broken:
        calls = 0

        def sample(self) -> TelemetrySnapshot:
            self.calls += 1
            raise RuntimeError("boom")

        def close(self) -> None:
            pass

    def bad_callback(_: TelemetrySnapshot) -> None:
        raise ValueError("callback bug")

    clock = FakeClock()
    sampler = TelemetrySampler(Broken(), clock=clock, on_sample=bad_callback)
    first = sampler.sample_once()
    second = sampler.sample_once()
    sampler.close()
    assert first.status == GpuStatus(False, "sampling failed: boom", False, "error")
    assert second.status == first.status and sampler.samples == 2


class Failing:
    """A source that raises `errors` in turn, then samples simulated GPUs."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.inner = TelemetrySource(SimulatedGpuSource(1), None)

    def sample(self) -> TelemetrySnapshot:
        if self.errors:
            raise self.errors.pop(0)
        return self.inner.sample()

    def close(self) -> None:
        pass


def test_out_of_descriptors_is_one_steady_line_no_traceback_and_passes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import errno
    import logging
    import resource

    emfile = [OSError(errno.EMFILE, "Too many open files", f"/proc/{name}")
              for name in ("stat", "meminfo", "stat")]  # fmt: skip
    sampler = TelemetrySampler(Failing(*emfile))
    with caplog.at_level(logging.DEBUG, logger="distcore"):
        shown = {sampler.sample_once().status.reason for _ in emfile}
        errors = sampler.errors()
        recovered = sampler.sample_once()
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    line = f"sampling failed: Too many open files (at this process's limit of {limit}: ulimit -n)"
    assert shown == {line} and [e.message for e in errors] == [line]
    assert recovered.status.available and sampler.errors() == ()
    assert [r.levelno for r in caplog.records] == [logging.DEBUG] * 3  # no traceback shown


def test_a_source_bug_logs_its_traceback_once_per_failing_stretch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    sampler = TelemetrySampler(Failing(*(RuntimeError("bug") for _ in range(3))))
    with caplog.at_level(logging.DEBUG, logger="distcore"):
        for _ in range(4):
            sampler.sample_once()
    levels = [r.levelno for r in caplog.records]
    assert levels == [logging.ERROR, logging.DEBUG, logging.DEBUG]
    assert caplog.records[0].exc_info is not None
