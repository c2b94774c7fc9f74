"""`distagent scale`: the documented document and TensorBoard run from real child processes, and
its pure parts (replica lists, notes) as tables."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distagent.commands.scale import parse_replicas, scale_notes
from distcore.errors import DistmonError

QUICKSTART = Path(__file__).resolve().parents[2] / "sample_configs" / "quickstart.toml"
FIELDS = {"replicas", "global_batch_size", "learning_rate", "examples_per_second",
          "step_time_ms", "input_wait_fraction", "scaling_efficiency"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1,2,4", [1, 2, 4]), ("4,1,2,2", [1, 2, 4]), ("8", [8]), (" 1, 2 ", [1, 2]),
     ("0,1", None), ("a", None), ("", None), ("-1", None)],
)
def test_replica_lists(text: str, expected: list[int] | None) -> None:
    if expected is None:
        with pytest.raises(DistmonError, match="--replicas"):
            parse_replicas(text)
    else:
        assert parse_replicas(text) == expected


def _run(replicas: int, wait: float) -> dict[str, Any]:
    return {"replicas": replicas, "input_wait_fraction": wait}


@pytest.mark.parametrize(
    ("kind", "runs", "expected"),
    [
        ("GPU", [_run(1, 0.01), _run(4, 0.02)], []),
        ("GPU", [_run(1, 0.01), _run(4, 0.30)], ["input pipeline is the limit"]),
        ("GPU", [_run(1, 0.30), _run(4, 0.31)], []),  # input-bound already, not rising
        ("GPU", [_run(1, 0.00), _run(2, 0.04)], []),  # rising, but still under 5%
        ("CPU", [_run(1, 0.01), _run(2, 0.01)], ["share those cores"]),
        ("CPU", [_run(1, 0.01)], []),
        ("CPU", [_run(1, 0.0), _run(2, 0.2)], ["input pipeline is the limit", "share those cores"]),
    ],
)
def test_notes(kind: str, runs: list[dict[str, Any]], expected: list[str]) -> None:
    notes = scale_notes(kind, runs, 2)
    assert len(notes) == len(expected)
    assert all(phrase in note for phrase, note in zip(expected, notes, strict=True))


@pytest.mark.slow
def test_scale_prints_the_document_and_writes_the_tensorboard_run(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "distagent", "scale", str(QUICKSTART), "--replicas", "1,2",
         "--steps", "20", "--json", "--set", f"run.logdir={tmp_path}"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["version"], doc["config"], doc["device_kind"]) == (1, str(QUICKSTART), "CPU")
    assert [r["replicas"] for r in doc["runs"]] == [1, 2]
    assert all(set(r) >= FIELDS for r in doc["runs"])
    one, two = doc["runs"]
    assert (one["global_batch_size"], two["global_batch_size"]) == (32, 64)
    assert math.isclose(two["learning_rate"], 2 * one["learning_rate"])  # linear rule
    assert one["scaling_efficiency"] == 1.0
    assert math.isclose(two["scaling_efficiency"],
                        two["examples_per_second"] / (2 * one["examples_per_second"]))
    assert all(r["examples_per_second"] > 0 and 0 <= r["input_wait_fraction"] <= 1
               for r in doc["runs"])
    assert any("share those cores" in note for note in doc["notes"])

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = EventAccumulator(str(tmp_path / "quickstart-scale"), size_guidance={"tensors": 0})
    run.Reload()
    points = {e.step: _value(e) for e in run.Tensors("scale/examples_per_second")}
    assert points == pytest.approx({1: one["examples_per_second"], 2: two["examples_per_second"]})
    efficiency = run.Tensors("scale/scaling_efficiency")
    assert [(e.step, pytest.approx(_value(e))) for e in efficiency] == [
        (2, two["scaling_efficiency"])]


def _value(event: Any) -> float:
    from tensorboard.util import tensor_util

    return float(tensor_util.make_ndarray(event.tensor_proto))
