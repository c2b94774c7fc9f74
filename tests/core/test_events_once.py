"""`distmon --once [--json]` over a logdir written by real writers, in a subprocess."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path

from distcore.alerts import Alert
from distcore.events import load_once
from distcore.events.jsonify import run_to_json
from distcore.events.snapshots import RunSnapshot, Series
from distcore.jobs.snapshots import Job, JobsSnapshot
from distcore.location import RunLocation
from distcore.snapshot import SNAPSHOT_VERSION
from distcore.telemetry.samples import GpuStatus, TelemetrySnapshot
from distmon.once import render_text


def _distmon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "distmon", *args], capture_output=True, text=True, timeout=120
    )


def _tensorboardx_logdir(root: Path) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(root / "exp1" / "train"))
    for step, value in enumerate([1.0, math.nan, math.inf, 0.5]):
        writer.add_scalar("loss", value, step)
    writer.add_scalar("neg", -math.inf, 0)
    writer.close()


def test_once_json_document(tmp_path: Path) -> None:
    _tensorboardx_logdir(tmp_path)
    result = _distmon("--once", "--json", "--poll", "--no-gpu", str(tmp_path))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["version"] == SNAPSHOT_VERSION and doc["logdirs"] == [str(tmp_path.resolve())]
    assert isinstance(doc["generated_at"], float) and isinstance(doc["alerts"], list)
    (run,) = doc["runs"]
    assert set(run) >= {"name", "path", "status", "files", "problems", "hparams", "scalars"}
    assert run["name"] == "exp1/train"
    assert run["path"] == str((tmp_path / "exp1" / "train").absolute())
    assert run["status"] in ("live", "idle") and run["files"] == 1 and run["problems"] == []
    loss = run["scalars"]["loss"]
    assert loss == {
        "last_step": 3, "last_value": 0.5, "last_wall_time": loss["last_wall_time"],
        "count": 4, "min": 0.5, "max": "inf",
        "spike_count": 0, "spikes": [],  # a loss: its spikes (an infinity is loss_nan's)
    }
    assert run["scalars"]["neg"]["last_value"] == "-inf"
    assert "gpus" in doc


def test_nan_is_written_as_a_string(tmp_path: Path) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(tmp_path))
    writer.add_scalar("loss", math.nan, 0)
    writer.close()
    (run,) = load_once([tmp_path])
    scalars = run_to_json(run)["scalars"]
    assert scalars["loss"]["last_value"] == "nan" and scalars["loss"]["min"] == "nan"
    json.dumps(scalars, allow_nan=False)


def test_once_text_table(tmp_path: Path) -> None:
    _tensorboardx_logdir(tmp_path)
    result = _distmon("--once", "--no-gpu", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "exp1/train" in result.stdout
    line = next(x for x in result.stdout.splitlines() if x.strip().startswith("loss"))
    assert "0.5" in line and "n=4" in line and "inf" in line


def test_render_text_lists_problems_and_hparams() -> None:
    scalar = Series("a", (0, 1), (3.0, math.nan), (0.5, 1.0), 1, math.nan, 1.0, 2, 0.25, 3.0)
    run = RunSnapshot(
        name="r", path=RunLocation.on_this_machine("/x/r"), status="gone", files=0,
        problems=("f: bad data CRC x2 (first at byte 10)",), hparams={"lr": 0.1},
        scalars={"a": scalar}, last_update=None,
    )
    alert = Alert("loss_nan", "critical", "r", "loss is NaN at step 1", 1.0)
    no_gpu = TelemetrySnapshot(1.0, GpuStatus(False, "NVML library not found"), (), None)
    snap = JobsSnapshot(
        generated_at=1.0, logdirs=("/x",), hosts=(), alerts=(alert,), local_telemetry=no_gpu,
        jobs=(Job("r", run.path, {"": run}, "gone", None, (), (alert,)),),
    )
    out = io.StringIO()
    render_text(snap, out)
    text = out.getvalue()
    assert "r  [gone, 0 files]" in text and "lr = 0.1" in text
    assert "bad data CRC x2" in text and "nan" in text and "n=2" in text
    assert "NVML library not found" in text
    assert "critical r: loss is NaN at step 1" in text


def test_missing_root_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = _distmon("--once", "--json", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "nope" in result.stderr
    assert result.stdout == ""


def test_render_text_names_a_gpu_alerts_host() -> None:
    alert = Alert("gpu_imbalance", "warning", None, "GPUs on gpu7 unevenly used", 1.0,
                  host="gpu7\x1b[2J")
    no_gpu = TelemetrySnapshot(1.0, GpuStatus(False, "x"), (), None)
    snap = JobsSnapshot(generated_at=1.0, logdirs=(), hosts=(), alerts=(alert,), jobs=(),
                        local_telemetry=no_gpu)
    out = io.StringIO()
    render_text(snap, out)
    assert "warning  gpu7\\x1b[2J: GPUs on gpu7 unevenly used" in out.getvalue()
