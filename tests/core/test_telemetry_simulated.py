"""The simulated GPUs: deterministic, plausible, labelled, and only used when asked for."""

from __future__ import annotations

import pytest

from distcore.telemetry import make_source
from distcore.telemetry.simulated import SimulatedGpuSource, simulated_device, utilization
from tests.core.fake_pynvml import FakeNvml


def ticking(start: float = 0.0, step: float = 1.0):  # type: ignore[no-untyped-def]
    now = [start - step]

    def clock() -> float:
        now[0] += step
        return now[0]

    return clock


def test_same_clock_same_numbers() -> None:
    a = SimulatedGpuSource(3, clock=ticking(1000.0))
    b = SimulatedGpuSource(3, clock=ticking(5.0))  # only time since start matters
    for _ in range(30):
        assert a.read() == b.read()


def test_labelled_simulated_everywhere() -> None:
    status, devices = SimulatedGpuSource(2).read()
    assert status.available and status.simulated and status.kind == "simulated"
    assert "simulated" in (status.reason or "")
    assert [d.index for d in devices] == [0, 1]
    assert all("(simulated)" in (d.name or "") and "simulated" in (d.uuid or "") for d in devices)


@pytest.mark.parametrize("index", [0, 1, 7])
def test_curves_are_plausible_over_ten_minutes(index: int) -> None:
    devices = [simulated_device(float(t), index) for t in range(0, 600)]
    for d in devices:
        assert d.utilization_gpu is not None and 0.0 <= d.utilization_gpu <= 100.0
        assert d.memory_used_mib is not None and d.memory_total_mib is not None
        assert 0.0 < d.memory_used_mib <= d.memory_total_mib
        assert d.temperature_c is not None and 30.0 <= d.temperature_c <= 90.0
        assert d.power_w is not None and d.power_limit_w is not None
        assert 0.0 < d.power_w <= d.power_limit_w
    busy = [utilization(float(t), index) for t in range(120, 240)]
    assert max(busy) > 85.0 and min(busy) < 20.0  # a training job with input stalls
    first, last = devices[0].memory_used_mib, devices[-1].memory_used_mib
    assert first is not None and last is not None and first < last  # warm-up fills memory


def test_devices_differ_from_each_other() -> None:
    _, (a, b) = SimulatedGpuSource(2, clock=lambda: 0.0).read()
    assert a.utilization_gpu != b.utilization_gpu or a.memory_used_mib != b.memory_used_mib


def test_zero_simulated_gpus_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        SimulatedGpuSource(0)


def test_simulation_never_touches_nvml_and_nvml_never_simulates() -> None:
    fake = FakeNvml()
    simulated = make_source(simulate_gpus=2, no_gpu=True, nvml=fake, host=False)
    snap = simulated.sample()
    simulated.close()
    assert snap.status.simulated and len(snap.devices) == 2 and fake.init_calls == 0
    real = make_source(nvml=fake, host=False)
    snap = real.sample()
    real.close()
    assert not snap.status.simulated and snap.devices[0].name == "NVIDIA H100 80GB HBM3"
    assert fake.init_calls == 1 and fake.shutdown_calls == 1


def test_no_gpu_flag() -> None:
    source = make_source(no_gpu=True, nvml=FakeNvml(), host=False)
    snap = source.sample()
    source.close()
    assert (snap.status.available, snap.status.simulated, snap.devices) == (False, False, ())
    assert snap.status.kind == "disabled"
    assert snap.status.reason == "GPU sampling disabled (--no-gpu)"
