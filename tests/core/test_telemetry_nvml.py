"""NVML sampling against a fake pynvml that raises the real NVML error classes."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pynvml
import pytest

from distcore.telemetry.nvml import NvmlGpuSource, nvml_failure
from distcore.telemetry.samples import GpuDevice, GpuStatus
from tests.core.fake_pynvml import GIB, MIB, FakeGpu, FakeNvml


def _nvml_loads() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


def read(fake: FakeNvml) -> tuple[GpuStatus, tuple[GpuDevice, ...]]:
    source = NvmlGpuSource(fake)
    try:
        return source.read()
    finally:
        source.close()


@pytest.mark.parametrize(
    ("code", "kind", "words"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no_library", "NVML library not found — no NVIDIA"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "no_driver", "NVIDIA driver not loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no_permission", "no permission to query the GPUs"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "error", "versions differ"),
        (pynvml.NVML_ERROR_UNKNOWN, "error", "NVML error: Unknown Error"),
    ],
)
def test_init_failure_is_a_status_with_a_readable_reason(code: int, kind: str, words: str) -> None:
    status, devices = read(FakeNvml(init_error=code))
    assert not status.available and not status.simulated and status.kind == kind
    assert status.reason is not None and words in status.reason
    assert "\n" not in status.reason
    assert devices == ()


def test_fake_raises_the_real_error_subclasses() -> None:
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        FakeNvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND).nvmlInit()


def test_init_is_lazy_remembered_and_shut_down_once() -> None:
    fake = FakeNvml()
    source = NvmlGpuSource(fake)
    assert fake.init_calls == 0
    source.read()
    source.read()
    assert fake.init_calls == 1
    source.close()
    source.close()
    assert fake.shutdown_calls == 1 and not fake.initialised


def test_failed_init_is_not_retried_every_tick_and_needs_no_shutdown() -> None:
    fake = FakeNvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    source = NvmlGpuSource(fake)
    source.read()
    source.read()
    source.close()
    assert fake.init_calls == 1 and fake.shutdown_calls == 0


def test_no_devices_is_a_status() -> None:
    status, devices = read(FakeNvml([]))
    assert (status.available, status.kind, devices) == (False, "no_devices", ())
    assert status.reason == "NVML found no NVIDIA GPU on this host"


def test_count_failure_is_a_status() -> None:
    status, _ = read(FakeNvml(count_error=pynvml.NVML_ERROR_NO_PERMISSION))
    assert not status.available and "no permission" in (status.reason or "")


def test_healthy_device_in_user_units() -> None:
    pid = os.getpid()
    fake = FakeNvml([FakeGpu(processes=[(pid, 1536 * MIB)])])
    status, (dev,) = read(fake)
    assert (status.available, status.reason, dev.error) == (True, None, None)
    assert (dev.index, dev.name, dev.uuid) == (0, "NVIDIA H100 80GB HBM3", FakeGpu().uuid)
    assert (dev.utilization_gpu, dev.utilization_memory) == (87.0, 41.0)
    assert (dev.memory_used_mib, dev.memory_total_mib) == (30 * 1024.0, 80 * 1024.0)
    assert (dev.temperature_c, dev.power_w, dev.power_limit_w) == (63.0, 412.5, 700.0)
    assert (dev.sm_clock_mhz, dev.fan_percent) == (1980.0, 45.0)
    assert (dev.pcie_rx_kib_s, dev.pcie_tx_kib_s) == (52_000.0, 9_000.0)
    (proc,) = dev.processes
    me = psutil.Process(pid)
    assert (proc.pid, proc.used_memory_mib, proc.name) == (pid, 1536.0, me.name())
    assert proc.cmdline == " ".join(me.cmdline())


FIELDS_BY_FUNCTION = [
    ("nvmlDeviceGetFanSpeed", ["fan_percent"]),
    ("nvmlDeviceGetPcieThroughput", ["pcie_rx_kib_s", "pcie_tx_kib_s"]),
    ("nvmlDeviceGetPowerUsage", ["power_w"]),
    ("nvmlDeviceGetEnforcedPowerLimit", ["power_limit_w"]),
    ("nvmlDeviceGetTemperature", ["temperature_c"]),
    ("nvmlDeviceGetClockInfo", ["sm_clock_mhz"]),
    ("nvmlDeviceGetUtilizationRates", ["utilization_gpu", "utilization_memory"]),
    ("nvmlDeviceGetMemoryInfo", ["memory_used_mib", "memory_total_mib"]),
    ("nvmlDeviceGetName", ["name"]),
]


@pytest.mark.parametrize(("function", "fields"), FIELDS_BY_FUNCTION)
@pytest.mark.parametrize(
    "code", [pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_NO_PERMISSION]
)
def test_one_failing_field_is_unknown_and_hides_nothing_else(
    function: str, fields: list[str], code: int
) -> None:
    _, (healthy,) = read(FakeNvml([FakeGpu()]))
    _, (dev,) = read(FakeNvml([FakeGpu(errors={function: code})]))
    assert dev.error is None
    for name in fields:
        assert getattr(dev, name) is None
    others = [f for _, fs in FIELDS_BY_FUNCTION for f in fs if f not in fields]
    assert {f: getattr(dev, f) for f in others} == {f: getattr(healthy, f) for f in others}


def test_mig_not_available_is_unknown_never_zero() -> None:
    # A MIG-enabled GPU: no device-wide utilization, process memory N/A (pynvml gives None),
    # and clocks answered with NVML's "value not available" sentinel.
    gpu = FakeGpu(
        errors={"nvmlDeviceGetUtilizationRates": pynvml.NVML_ERROR_NOT_SUPPORTED},
        processes=[(os.getpid(), None)],
        sm_clock=0xFFFFFFFF,
    )
    status, (dev,) = read(FakeNvml([gpu]))
    assert status.available
    assert (dev.utilization_gpu, dev.utilization_memory, dev.sm_clock_mhz) == (None, None, None)
    assert dev.processes[0].used_memory_mib is None
    assert dev.memory_used_mib == 30 * 1024.0


def test_gpu_lost_mid_run_is_a_device_error_and_the_other_gpu_still_shows() -> None:
    fake = FakeNvml([FakeGpu(), FakeGpu(uuid="GPU-b")])
    source = NvmlGpuSource(fake)
    try:
        first, _ = source.read()
        fake.gpus[1].lost = True
        status, (good, lost) = source.read()
    finally:
        source.close()
    assert first.available and first.reason is None and first.kind == "ok"
    assert status.available and status.kind == "degraded"
    assert status.reason == (
        "1 of 2 GPUs unreadable: GPU 1: GPU is lost — it stopped responding; "
        "the host needs a GPU reset"
    )
    assert good.error is None and good.utilization_gpu == 87.0
    assert lost.error is not None and "GPU is lost" in lost.error
    assert (lost.index, lost.utilization_gpu, lost.memory_used_mib) == (1, None, None)


def test_gpu_lost_after_its_handle_stops_further_queries() -> None:
    gpu = FakeGpu(errors={"nvmlDeviceGetUtilizationRates": pynvml.NVML_ERROR_GPU_IS_LOST})
    _, (dev,) = read(FakeNvml([gpu]))
    assert dev.error == "GPU 0: GPU is lost — it stopped responding; the host needs a GPU reset"
    assert dev.memory_used_mib is None and dev.temperature_c is None


def test_every_gpu_lost_means_unavailable() -> None:
    status, devices = read(FakeNvml([FakeGpu(lost=True), FakeGpu(lost=True)]))
    assert not status.available and status.kind == "gpu_lost" and len(devices) == 2
    assert (status.reason or "").startswith("2 of 2 GPUs unreadable")


def test_every_gpu_unreadable_for_mixed_reasons_is_an_error() -> None:
    denied = FakeGpu(handle_error=pynvml.NVML_ERROR_NO_PERMISSION)
    status, _ = read(FakeNvml([FakeGpu(lost=True), denied]))
    assert (status.available, status.kind) == (False, "error")


def test_handle_error_on_one_device() -> None:
    fake = FakeNvml([FakeGpu(handle_error=pynvml.NVML_ERROR_NO_PERMISSION), FakeGpu()])
    status, (denied, ok) = read(fake)
    assert status.available and status.kind == "degraded"
    assert denied.error == "GPU 0: no permission to query the GPUs — check access to /dev/nvidia*"
    assert ok.error is None and ok.power_w == 412.5


def test_process_that_is_gone_keeps_its_pid_and_memory() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    _, (dev,) = read(FakeNvml([FakeGpu(processes=[(child.pid, 2 * GIB)])]))
    (proc,) = dev.processes
    assert (proc.pid, proc.used_memory_mib, proc.name, proc.cmdline) == (
        child.pid, 2048.0, None, None
    )


def test_older_pynvml_without_a_function_gives_unknown() -> None:
    _, (dev,) = read(FakeNvml(missing=frozenset({"nvmlDeviceGetPcieThroughput"})))
    assert (dev.pcie_rx_kib_s, dev.pcie_tx_kib_s) == (None, None)
    assert dev.utilization_gpu == 87.0


def test_pcie_can_be_skipped_because_nvml_samples_the_bus_for_it() -> None:
    source = NvmlGpuSource(FakeNvml(), pcie=False)
    try:
        _, (dev,) = source.read()
    finally:
        source.close()
    assert (dev.pcie_rx_kib_s, dev.pcie_tx_kib_s, dev.power_w) == (None, None, 412.5)


def test_unknown_error_code_keeps_nvmls_words() -> None:
    err = pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
    assert nvml_failure(pynvml, err)[1] == "NVML timed out"
    assert nvml_failure(pynvml, pynvml.NVMLError(pynvml.NVML_ERROR_IRQ_ISSUE))[1].startswith(
        "NVML error: Interrupt"
    )


@pytest.mark.skipif(_nvml_loads(),
                    reason="this host has an NVIDIA driver (runs on a host without one)")
def test_real_pynvml_on_a_host_without_driver() -> None:
    source = NvmlGpuSource()
    try:
        status, devices = source.read()
    finally:
        source.close()
    assert status == type(status)(
        False, "NVML library not found — no NVIDIA driver on this host", False, "no_library"
    )
    assert devices == ()
