"""Counts in messages agree with their number: "1 GPU", "2 GPUs", never "1 GPUs" or "GPU(s)"."""

from __future__ import annotations

import pytest

from distcore.telemetry.nvml import device_status, empty_device
from distcore.telemetry.simulated import SimulatedGpuSource
from distcore.wording import counted


@pytest.mark.parametrize(
    ("count", "noun", "plural", "expected"),
    [
        (0, "run", None, "0 runs"),
        (1, "run", None, "1 run"),
        (2, "run", None, "2 runs"),
        (1, "unreadable image", None, "1 unreadable image"),
        (7, "unreadable image", None, "7 unreadable images"),
        (1, "recovery", "recoveries", "1 recovery"),
        (3, "recovery", "recoveries", "3 recoveries"),
        (1, "batch", "batches", "1 batch"),
        (-1, "step", None, "-1 steps"),
        (10**6, "record", None, "1000000 records"),
    ],
)
def test_counted(count: int, noun: str, plural: str | None, expected: str) -> None:
    assert counted(count, noun, plural) == expected


@pytest.mark.parametrize(("gpus", "expected"), [(1, "simulated: 1 GPU (--simulate-gpus)"),
                                                (4, "simulated: 4 GPUs (--simulate-gpus)")])
def test_simulated_gpus_reason(gpus: int, expected: str) -> None:
    status, _ = SimulatedGpuSource(gpus, clock=lambda: 0.0).read()
    assert (status.reason or "").startswith(expected)


@pytest.mark.parametrize(("devices", "broken", "expected"), [
    (1, 1, "1 of 1 GPU unreadable: "),
    (2, 1, "1 of 2 GPUs unreadable: "),
    (3, 3, "3 of 3 GPUs unreadable: "),
])
def test_unreadable_gpus_summary(devices: int, broken: int, expected: str) -> None:
    found = tuple(empty_device(i, "GPU is lost" if i < broken else "") for i in range(devices))
    status = device_status(found, ["gpu_lost"] * broken)
    assert (status.reason or "").startswith(expected)
