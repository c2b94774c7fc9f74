"""GPM through NvmlGpuSource, against a fake pynvml built on NVML's real GPM structures."""

from __future__ import annotations

import time

import pynvml
import pytest

from distcore.telemetry.gpm import FIRST_INTERVAL_S, combined_reason
from distcore.telemetry.nvml import NvmlGpuSource
from tests.core.fake_pynvml import FakeGpu, FakeNvml

AMPERE = pynvml.NVML_DEVICE_ARCH_AMPERE


def test_gpm_values_are_rates_between_two_samples_the_first_read_takes_both() -> None:
    gpu = FakeGpu()
    fake = FakeNvml([gpu])
    source = NvmlGpuSource(fake)
    try:
        started = time.monotonic()
        status, (first,) = source.read()
        # A rate needs two samples: the first read takes a second one a moment later, once
        # (a one-shot --once has figures too).
        assert time.monotonic() - started >= FIRST_INTERVAL_S
        assert status.gpm_reason is None
        assert (first.sm_activity, first.sm_occupancy, first.tensor_activity,
                first.dram_bandwidth) == (71.5, 38.25, 42.0, 55.5)
        gpu.gpm[pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL] = 3.0
        started = time.monotonic()
        _, (second,) = source.read()
        assert second.tensor_activity == 3.0 and time.monotonic() - started < FIRST_INTERVAL_S
    finally:
        source.close()
    assert fake.gpm_samples == {} and fake.gpm_freed == 2  # both buffers given back


def test_a_metric_nvml_refuses_is_unknown_not_zero() -> None:
    gpu = FakeGpu()
    del gpu.gpm[pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL]
    source = NvmlGpuSource(FakeNvml([gpu]))
    try:
        _, (device,) = source.read()
    finally:
        source.close()
    assert device.dram_bandwidth is None and device.sm_activity == 71.5


@pytest.mark.parametrize(
    ("gpus", "reason"),
    [
        ([FakeGpu(architecture=AMPERE, name="NVIDIA A100-SXM4-80GB")],
         "no GPM activity counters on GPU 0: Not Supported (NVML's GPM counters need a Hopper "
         "or newer GPU)"),
        ([FakeGpu(architecture=AMPERE), FakeGpu(architecture=AMPERE)],
         "no GPM activity counters on any GPU: Not Supported"),
        ([FakeGpu(), FakeGpu(architecture=AMPERE)], "no GPM activity counters on GPU 1: "),
        ([FakeGpu(errors={"nvmlGpmQueryDeviceSupport": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND})],
         "on GPU 0: Function Not Found"),  # a driver older than GPM
    ],
)
def test_gpus_without_gpm_are_said_once_with_nvmls_reason(gpus: list[FakeGpu],
                                                          reason: str) -> None:
    source = NvmlGpuSource(FakeNvml(gpus))
    try:
        for _ in range(3):
            status, devices = source.read()
            assert status.available and status.gpm_reason is not None
            assert reason in status.gpm_reason
    finally:
        source.close()
    assert all(d.sm_activity is None for d in devices if d.index >= len(gpus) - 1)


def test_an_older_nvidia_ml_py_without_gpm_says_so() -> None:
    fake = FakeNvml([FakeGpu()], missing=frozenset({"nvmlGpmMetricsGet"}))
    source = NvmlGpuSource(fake)
    try:
        status, (device,) = source.read()
    finally:
        source.close()
    assert status.gpm_reason is not None and "nvmlGpmMetricsGet" in status.gpm_reason
    assert device.utilization_gpu == 87 and device.sm_activity is None


def test_a_lost_gpu_mid_gpm_starts_the_interval_again() -> None:
    gpu = FakeGpu()
    source = NvmlGpuSource(FakeNvml([gpu]))
    try:
        source.read()
        gpu.errors["nvmlGpmSampleGet"] = pynvml.NVML_ERROR_UNKNOWN
        status, (device,) = source.read()
        assert device.sm_activity is None and "GPM: Unknown Error" in (status.gpm_reason or "")
        del gpu.errors["nvmlGpmSampleGet"]
        status, (device,) = source.read()  # a fresh first sample, and its interval at once
        assert device.sm_activity == 71.5 and status.gpm_reason is None
    finally:
        source.close()


def test_the_fake_checks_the_request_as_nvml_does() -> None:
    fake = FakeNvml([FakeGpu()])
    fake.nvmlInit()
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = 99
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        fake.nvmlGpmMetricsGet(request)


@pytest.mark.parametrize(
    ("reasons", "devices", "line"),
    [({}, 2, None),
     ({0: "x"}, 1, "no GPM activity counters on GPU 0: x"),
     ({0: "x", 1: "x"}, 2, "no GPM activity counters on any GPU: x"),
     ({0: "x", 2: "x"}, 4, "no GPM activity counters on GPU 0, 2: x"),
     ({0: "x", 1: "y"}, 2, "no GPM activity counters: GPU 0: x; GPU 1: y")],
)
def test_combined_reason(reasons: dict[int, str], devices: int, line: str | None) -> None:
    assert combined_reason(reasons, devices) == line


def test_gpm_reaches_the_json_the_text_and_the_metrics() -> None:
    """A real sampler over the fake's H100 and A100, through the real job index, to
    `--once --json`'s document, its text and the /metrics exposition."""
    import io
    import os

    from distcore.jobs.index import JobIndex
    from distcore.jobs.jsonify import to_json
    from distcore.telemetry import make_source
    from distcore.telemetry.sampler import TelemetrySampler
    from distmon.gpus_text import render_gpus_text
    from tests.core.test_metrics import exposition, named, samples
    from tests.tui.fixed import FixedRuns

    fake = FakeNvml([FakeGpu(), FakeGpu(architecture=AMPERE, name="NVIDIA A100-SXM4-80GB")])
    tel = TelemetrySampler(make_source(nvml=fake, pids=[os.getpid()]), interval=1.0,
                           wait=lambda _: True)
    try:
        tel.sample_once()  # one sample, as --once takes
        snap = JobIndex(FixedRuns([]), telemetry=tel).refresh()
    finally:
        tel.close()
    assert snap is not None
    doc = to_json(snap)
    hopper, ampere = doc["gpus"]["devices"]
    assert (hopper["sm_activity"], hopper["tensor_activity"]) == (71.5, 42.0)
    assert ampere["sm_activity"] is None and ampere["dram_bandwidth"] is None
    assert doc["gpus"]["gpm_reason"].startswith("no GPM activity counters on GPU 1: Not Supp")
    assert doc["hosts"][0]["gpm_reason"] == doc["gpus"]["gpm_reason"]
    out = io.StringIO()
    assert snap.local_telemetry is not None
    render_gpus_text(snap.local_telemetry, out)
    assert "util 87%  sm 72%  occupancy 38%  tensor 42%  dram 56%" in out.getvalue()
    assert "GPU 1: Not Supported" in out.getvalue()
    found = samples(exposition(snap))
    tensor = {s[1]["gpu"]: s[2] for s in named(found, "distmon_gpu_tensor_activity_ratio")}
    assert tensor == {"0": pytest.approx(0.42)}  # the A100's is absent, not 0
    assert named(found, "distmon_gpu_sm_occupancy_ratio")[0][2] == pytest.approx(0.3825)


def test_a_workers_recorded_gpm_is_read_back_from_its_system_run() -> None:
    from distcore import names
    from distcore.jobs.hosts import host_from_system_run
    from distcore.telemetry.sampler import snapshot_metrics
    from distcore.telemetry.samples import TelemetrySnapshot
    from tests.tui import fixed

    source = NvmlGpuSource(FakeNvml([FakeGpu()]))
    try:
        status, devices = source.read()
    finally:
        source.close()
    written = snapshot_metrics(TelemetrySnapshot(fixed.NOW, status, devices, None))
    assert written[names.gpu_tag(0, "tensor_activity")] == 42.0  # what the recorder writes
    run = fixed.run("job/system", *(fixed.series(tag, [v]) for tag, v in written.items()
                                     if v is not None))
    (gpu,) = host_from_system_run("job", "system", run).gpus
    assert (gpu.sm_activity, gpu.sm_occupancy, gpu.tensor_activity, gpu.dram_bandwidth) == \
        (71.5, 38.25, 42.0, 55.5)
