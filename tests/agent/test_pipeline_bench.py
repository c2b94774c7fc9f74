"""`distagent bench-input`: both pipelines timed on the same data, in-process."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from distagent.commands import bench_input
from distcore.errors import DistmonError

SAMPLES = Path(__file__).resolve().parents[2] / "sample_configs"


def _args(*overrides: str, batches: int = 5, as_json: bool = True) -> argparse.Namespace:
    base = ["data.synthetic.num_examples=1024", "data.shuffle_buffer=128"]
    return argparse.Namespace(config=str(SAMPLES / "quickstart.toml"),
                              overrides=base + list(overrides), batches=batches, json=as_json)


def test_bench_input_reports_both_pipelines_and_the_ratio(
    tf: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench_input.run(_args()) == 0
    result = json.loads(capsys.readouterr().out)
    for name in ("optimized", "naive"):
        timing = result[name]
        assert timing["examples_per_second"] > 0 and timing["first_batch_seconds"] > 0
        assert timing["cpu_cores"] >= 0
        assert timing["examples_per_second"] == pytest.approx(
            timing["batches_per_second"] * result["global_batch_size"])
    assert result["ratio"] == pytest.approx(
        result["optimized"]["examples_per_second"] / result["naive"]["examples_per_second"])
    text = bench_input.format_result(result)
    assert "optimized" in text and "naive" in text and "x (optimized / naive" in text


def test_bench_input_needs_a_batch() -> None:
    with pytest.raises(DistmonError, match="--batches"):
        bench_input.run(_args(batches=0))
