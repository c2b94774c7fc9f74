"""`[telemetry]` and the system recorder: simulated GPUs and the host/worker hparams reach the
event files, read back by distcore's real reader (no TensorFlow job needed: the real recorder)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from distagent.config import config_from_dict
from distcore import names
from distcore.errors import ConfigErrors
from tests.kit.wait import wait_until


@pytest.mark.parametrize(
    ("telemetry", "problem"),
    [
        ({}, None),
        ({"interval_seconds": 0.5, "simulate_gpus": 2}, None),
        ({"interval_seconds": 0.0}, "telemetry.interval_seconds: expected seconds from 0.1"),
        ({"interval_seconds": float("nan")}, "telemetry.interval_seconds: expected seconds"),
        ({"interval_seconds": float("inf")}, "telemetry.interval_seconds: expected seconds"),
        ({"simulate_gpus": -1}, "telemetry.simulate_gpus: expected an integer from 0 to 64"),
        ({"simulate_gpus": 10_000}, "telemetry.simulate_gpus: expected an integer from 0 to 64"),
        ({"simulate_gpu": 2}, 'telemetry.simulate_gpu: unknown key; did you mean "simulate_gpus"'),
    ],
)
def test_telemetry_keys(telemetry: dict[str, Any], problem: str | None) -> None:
    if problem is None:
        cfg = config_from_dict({"telemetry": telemetry})
        assert cfg.telemetry.interval_seconds == telemetry.get("interval_seconds", 5.0)
        assert cfg.telemetry.simulate_gpus == telemetry.get("simulate_gpus", 0)
        return
    with pytest.raises(ConfigErrors) as caught:
        config_from_dict({"telemetry": telemetry})
    assert any(problem in str(e) for e in caught.value.errors), caught.value


@pytest.mark.parametrize("worker", [None, 1])
def test_recorder_writes_simulated_gpus_and_where_it_ran(
    tf: Any, tmp_path: Path, worker: int | None
) -> None:
    from distagent.system_record import SystemRecorder
    from distcore.events import load_once

    subdir = names.SYSTEM_DIR if worker is None else names.worker_system_dir(worker)
    recorder = SystemRecorder(tmp_path / "job", interval=0.1, subdir=subdir,
                              simulate_gpus=3, worker=worker)
    recorder.start()
    try:
        wait_until(lambda: recorder.written >= 3, "three samples written", 30)
    finally:
        recorder.close()
    assert recorder.written >= 3

    (run,) = load_once([tmp_path])
    assert run.name == f"job/{subdir}"
    expected = {"host": socket.gethostname(), "simulated_gpus": 3}
    if worker is not None:
        expected["worker"] = worker
    assert dict(run.hparams) == expected
    for index in range(3):
        utilization = run.scalars[names.gpu_tag(index, "utilization")]
        assert len(utilization.steps) >= 3
        assert all(0.0 <= v <= 100.0 for v in utilization.values)
    assert names.gpu_tag(3, "utilization") not in run.scalars
    assert names.HOST_CPU_PERCENT in run.scalars
