"""`distmon --once --json` judges the curves, not only each series' last point."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

from distmon.once import run_once
from distmon.options import Options
from tests.kit.writers import write_scalars


def _alerts(logdir: Path) -> list[dict[str, object]]:
    out = io.StringIO()
    assert run_once(Options(logdirs=(logdir,), json=True, once=True, no_gpu=True), out) == 0
    return list(json.loads(out.getvalue())["alerts"])


def test_a_steadily_rising_loss_is_flagged(tmp_path: Path) -> None:
    write_scalars(tmp_path / "diverging", [1.0 + 0.05 * i for i in range(40)], time.time() - 40)
    write_scalars(tmp_path / "healthy", [1.0 / (1 + i) for i in range(40)], time.time() - 40)
    found = {(a["kind"], a["run"]) for a in _alerts(tmp_path)}
    assert ("loss_rising", "diverging") in found
    assert not any(run == "healthy" for _, run in found)


def test_a_run_whose_points_stopped_arriving_is_flagged(tmp_path: Path) -> None:
    # One point a second for 40 s, then two minutes of silence: far longer than its interval.
    write_scalars(tmp_path / "stalled", [1.0 / (1 + i) for i in range(40)], time.time() - 160)
    write_scalars(tmp_path / "writing", [1.0 / (1 + i) for i in range(40)], time.time() - 39)
    stalled = [a for a in _alerts(tmp_path) if a["kind"] == "run_stalled"]
    assert [a["run"] for a in stalled] == ["stalled"]
    assert "no new points for" in str(stalled[0]["message"])


def test_a_finished_distagent_jobs_system_samples_are_not_stalled(tmp_path: Path) -> None:
    """system/ and system/worker-<i>/ belong to the job whose run.json says it finished."""
    job = tmp_path / "job"
    for run in ("train", "system", "system/worker-1"):
        write_scalars(job / run, [1.0 / (1 + i) for i in range(40)], time.time() - 160)
    (job / "run.json").write_text(json.dumps({"status": "finished"}))
    write_scalars(tmp_path / "other", [1.0 / (1 + i) for i in range(40)], time.time() - 160)
    stalled = {a["run"] for a in _alerts(tmp_path) if a["kind"] == "run_stalled"}
    assert stalled == {"other"}
