"""The `perf/` tags are a contract any writer may emit (docs/watching.md): a plain script with
tensorboardX, no distagent, writes each of them, and distmon reads them by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distcore import names

PLAIN_SCRIPT = """
import sys, time
from tensorboardX import SummaryWriter

writer = SummaryWriter(sys.argv[1] + "/train")
start = time.time() - 10
for step in range(1, 6):
    for tag, value in json.loads(sys.argv[2]).items():
        writer.add_scalar(tag, value, step, walltime=start + step)
writer.close()
"""

VALUES = {
    names.INPUT_WAIT_FRACTION: 0.5, names.INPUT_WAIT_MS: 50.0, names.STEP_TIME_MS: 100.0,
    names.EXAMPLES_PER_SECOND: 640.0, names.MFU: 0.25, names.MODEL_FLOPS_PER_SECOND: 2.5e12,
    names.GRAD_NORM: 1.5, names.STEP_COMPUTE_SECONDS: 0.04, names.REDUCE_WAIT_SECONDS: 0.01,
}


def test_a_plain_scripts_perf_tags_are_read_by_name(tmp_path: Path) -> None:
    run = tmp_path / "mine"
    subprocess.run([sys.executable, "-c", "import json\n" + PLAIN_SCRIPT, str(run),
                    json.dumps(VALUES)], check=True, timeout=120)
    done = subprocess.run([sys.executable, "-m", "distmon", "--once", "--json", "--no-gpu",
                           str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    (train,) = [r for r in doc["runs"] if r["name"] == "mine/train"]
    read = {tag: train["scalars"][tag]["last_value"] for tag in VALUES}
    assert read == pytest.approx(VALUES, rel=1e-6)  # float32 in the event file
    stalls = [a["message"] for a in doc["alerts"] if a["kind"] == "input_stall"]
    assert stalls and "50% of the step time" in stalls[0]
    (job,) = doc["jobs"]
    assert job["mfu"] == VALUES[names.MFU]
