"""The `gpus` / `host` JSON, through telemetry_to_json and through the real `distmon --once` CLI."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pynvml
import pytest

from distcore.telemetry import make_source
from distcore.telemetry.jsonify import telemetry_to_json
from distmon.gpus_text import render_gpus_text
from tests.core.fake_pynvml import MIB, FakeGpu, FakeNvml
from tests.core.test_telemetry_nvml import _nvml_loads

DEVICE_KEYS = {
    "index", "name", "uuid", "utilization_gpu", "utilization_memory", "memory_used_mib",
    "memory_total_mib", "temperature_c", "power_w", "power_limit_w", "processes",
}


def sample_json(fake: FakeNvml) -> tuple[dict[str, Any], dict[str, Any] | None]:
    source = make_source(nvml=fake, pids=[os.getpid()])
    try:
        gpus, host = telemetry_to_json(source.sample())
    finally:
        source.close()
    json.dumps([gpus, host], allow_nan=False)  # valid strict JSON
    return gpus, host


def test_unknown_fields_are_null_and_errors_are_kept() -> None:
    mig = FakeGpu(
        errors={"nvmlDeviceGetUtilizationRates": pynvml.NVML_ERROR_NOT_SUPPORTED},
        processes=[(os.getpid(), None), (os.getpid(), 512 * MIB)],
    )
    gpus, host = sample_json(FakeNvml([mig, FakeGpu(lost=True)]))
    assert (gpus["available"], gpus["simulated"], gpus["kind"]) == (True, False, "degraded")
    assert "GPU 1: GPU is lost" in gpus["reason"]
    first, lost = gpus["devices"]
    assert first.keys() >= DEVICE_KEYS
    assert (first["utilization_gpu"], first["utilization_memory"]) == (None, None)
    assert first["memory_used_mib"] == 30 * 1024.0 and first["error"] is None
    assert [p["used_memory_mib"] for p in first["processes"]] == [None, 512.0]
    assert {"pid", "name", "cmdline"} <= first["processes"][0].keys()
    assert lost["error"].startswith("GPU 1: GPU is lost") and lost["power_w"] is None
    assert host is not None and host["processes"][0]["pid"] == os.getpid()
    assert {"cpu_percent", "per_core", "load_avg", "memory_used_mib", "memory_total_mib"} <= set(
        host
    )


def test_readable_text_says_na_not_zero() -> None:
    mig = FakeGpu(errors={"nvmlDeviceGetUtilizationRates": pynvml.NVML_ERROR_NOT_SUPPORTED})
    source = make_source(nvml=FakeNvml([mig, FakeGpu(lost=True)]), pids=[os.getpid()])
    try:
        sample = source.sample()
    finally:
        source.close()
    out = io.StringIO()
    render_gpus_text(sample, out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "GPUs: 2"
    assert lines[1].startswith("  note: 1 of 2 GPUs unreadable")
    assert "util n/a" in lines[2] and "mem 30.0/80.0 GiB" in lines[2] and "63°C" in lines[2]
    assert lines[3].startswith("  GPU 1  unknown  ERROR: GPU 1: GPU is lost")
    assert lines[4].startswith("  host  cpu ")


def distmon_once(tmp_path: Path, *flags: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "distmon", "--once", "--json", *flags, str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=True,
    )
    doc: dict[str, Any] = json.loads(proc.stdout)
    assert doc["host"]["memory_total_mib"] > 0 and doc["host"]["cores"] >= 1
    return doc


@pytest.mark.skipif(_nvml_loads(),
                    reason="this host has an NVIDIA driver (runs on a host without one)")
def test_cli_without_a_driver_says_why(tmp_path: Path) -> None:
    gpus = distmon_once(tmp_path)["gpus"]
    assert gpus == {
        "available": False,
        "reason": "NVML library not found — no NVIDIA driver on this host",
        "simulated": False,
        "kind": "no_library",
        "gpm_reason": None,  # NVML itself is missing: said once, by `reason`
        "sampled_at": gpus["sampled_at"],
        "devices": [],
    }


def test_cli_no_gpu(tmp_path: Path) -> None:
    gpus = distmon_once(tmp_path, "--no-gpu")["gpus"]
    assert (gpus["available"], gpus["kind"], gpus["reason"], gpus["devices"]) == (
        False, "disabled", "GPU sampling disabled (--no-gpu)", []
    )


def test_cli_simulated_gpus(tmp_path: Path) -> None:
    gpus = distmon_once(tmp_path, "--simulate-gpus", "2")["gpus"]
    assert gpus["available"] and gpus["simulated"] and gpus["kind"] == "simulated"
    assert "simulated" in gpus["reason"]
    assert [d["index"] for d in gpus["devices"]] == [0, 1]
    for dev in gpus["devices"]:
        assert dev.keys() >= DEVICE_KEYS
        assert "(simulated)" in dev["name"]
        assert 0 <= dev["utilization_gpu"] <= 100
        assert 0 < dev["memory_used_mib"] <= dev["memory_total_mib"]
