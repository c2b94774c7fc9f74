"""The input-bound advice reads the job's own pipeline: a job that already maps in parallel,
prefetches and caches is told what is left, not to use them; one without some is told those by
their config keys; a logdir that says nothing of its pipeline gets the generic remedy."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from distcore import names
from distcore.alerts.input_advice import LEFT, PipelineFacts, input_advice, pipeline_facts
from distcore.alerts.series import REMEDY
from distmon.once import run_once
from distmon.options import Options

SAMPLES = Path(__file__).resolve().parents[2] / "sample_configs"
ALL_ON = {"optimize": True, "parallel_calls": "autotune", "prefetch": "autotune",
          "cache": "memory"}  # fmt: skip


@pytest.mark.parametrize(
    ("pipeline", "advice"),
    [
        (ALL_ON, LEFT),
        ({**ALL_ON, "parallel_calls": 8, "prefetch": 2, "cache": "/scratch/cache"}, LEFT),
        ({**ALL_ON, "optimize": False}, "turn on data.optimize (off: the map runs one example "
                                        "at a time, nothing is prefetched or cached)"),
        ({**ALL_ON, "cache": False}, "use a cache of the dataset where it fits (data.cache); it "
                                     "already uses parallel map and prefetch"),
        ({**ALL_ON, "parallel_calls": 1, "prefetch": 0, "cache": False},
         'use parallel map (data.parallel_calls = "autotune"), prefetch (data.prefetch = '
         '"autotune") and a cache of the dataset where it fits (data.cache)'),
        ({"parallel_calls": "autotune"}, None),  # the rest unknown: nothing known to be off
        ({**ALL_ON, "prefetch": True, "parallel_calls": [1]}, None),  # odd types: unknown
        ("autotune", None),
        (None, None),
    ],
)
def test_the_advice_for_each_pipeline(pipeline: Any, advice: str | None) -> None:
    assert input_advice(pipeline_facts(pipeline)) == advice


def test_facts_from_an_untrusted_pipeline_never_raise() -> None:
    for value in ({"parallel_calls": float("nan")}, {"cache": 3}, {"prefetch": -1}, {}):
        assert isinstance(pipeline_facts(value), PipelineFacts)


def _planned(config: str) -> dict[str, Any]:
    """distagent's own plan of a sample config (what run.json's `plan` holds)."""
    command = [sys.executable, "-m", "distagent", "plan", str(SAMPLES / config), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    return dict(json.loads(done.stdout))


def _input_bound_job(job: Path, plan: dict[str, Any] | None) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(job / names.TRAIN_DIR))
    start = time.time() - 20
    for step in range(20):
        writer.add_scalar(names.INPUT_WAIT_FRACTION, 0.5, step, walltime=start + step)
        writer.add_scalar("loss", 1.0 / (1 + step), step, walltime=start + step)
    writer.close()
    if plan is not None:
        (job / names.RUN_JSON).write_text(json.dumps({"status": "running", "plan": plan}))


def _stall_message(logdir: Path, job: str) -> str:
    out = io.StringIO()
    assert run_once(Options(logdirs=(logdir,), json=True, once=True, no_gpu=True), out) == 0
    found = [a for a in json.loads(out.getvalue())["alerts"] if a["kind"] == "input_stall"
             and a["run"].startswith(job)]  # fmt: skip
    assert len(found) == 1, found
    return str(found[0]["message"])


@pytest.mark.slow
def test_distagents_plans_get_their_own_advice(tmp_path: Path) -> None:
    _input_bound_job(tmp_path / "tuned", _planned("quickstart.toml"))
    _input_bound_job(tmp_path / "naive", _planned("input_bound.toml"))
    _input_bound_job(tmp_path / "plain", None)
    assert _stall_message(tmp_path, "tuned").endswith(f"Recommendation: {LEFT}.")
    assert "Recommendation: turn on data.optimize" in _stall_message(tmp_path, "naive")
    assert _stall_message(tmp_path, "plain").endswith(f"Recommendation: {REMEDY}.")
