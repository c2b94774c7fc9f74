"""MFU for a real `distagent start` on CPU replicas, as `distmon --once --json` shows it.

One short job (mlp, 2 CPU replicas, 30 steps): essential end to end, since the FLOPs come from
TensorFlow tracing the job's own model and the peak from a probe on this CPU; about 15 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distcore import names
from tests.agent.test_cli_runs import ENV, QUICKSTART, agent
from tests.json_shape import undocumented

pytestmark = pytest.mark.slow


def test_mfu_on_cpu_replicas_reaches_the_events_run_json_and_distmon(tmp_path: Path) -> None:
    settings = {
        "run.logdir": str(tmp_path), "run.name": "mfu", "strategy.cpu_replicas": 2,
        "data.per_replica_batch_size": 16, "data.validation_fraction": 0.0,
        "data.synthetic.num_examples": 960, "data.synthetic.input_shape": "[8, 8, 1]",
        "train.epochs": 1, "train.log_every_steps": 5, "train.checkpoint_every_steps": 0,
    }
    sets = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    job = subprocess.run(agent("start", str(QUICKSTART), *sets), capture_output=True,
                         text=True, env=ENV, timeout=240)
    assert job.returncode == 0, job.stdout + job.stderr
    assert "FLOPs per step" in job.stdout
    assert "measured (float32 matmul on this CPU, median of" in job.stdout
    plan = json.loads((tmp_path / "mfu" / names.RUN_JSON).read_text())["plan"]
    forward = plan["forward_flops_per_example"]
    assert forward > 0 and plan["flops_per_step"] == pytest.approx(3 * forward * 32)
    assert plan["peak_source"].startswith("measured") and plan["peak_devices"] == 1

    once = subprocess.run([sys.executable, "-m", "distmon", "--once", "--json", str(tmp_path)],
                          capture_output=True, text=True, env=ENV, timeout=120)
    assert once.returncode == 0, once.stderr
    doc = json.loads(once.stdout)
    train = next(r for r in doc["runs"] if r["name"] == "mfu/train")
    mfu, rate = train["scalars"][names.MFU], train["scalars"][names.MODEL_FLOPS_PER_SECOND]
    assert mfu["count"] == rate["count"] >= 5  # at every log point but compiling ones
    assert mfu["last_value"] == pytest.approx(rate["last_value"] / plan["peak_flops_per_second"])
    assert 0 < mfu["last_value"] < 5  # a loaded machine's probe can read low: not above 1 only
    (job_doc,) = doc["jobs"]
    assert job_doc["mfu"] == pytest.approx(mfu["last_value"])
    assert job_doc["ledger"]["goodput"] > 0 and job_doc["workers"]
    assert undocumented(doc) == [], "keys docs/watching.md does not publish"
    _the_dashboard_row_and_the_metrics_show_it(tmp_path, mfu["last_value"])


def _the_dashboard_row_and_the_metrics_show_it(logdir: Path, mfu: float) -> None:
    """The same logdir through distmon's one wiring, as the dashboard and --serve build it:
    the runs table's mfu cell and distmon_mfu_ratio{job}."""
    from distcore.metrics import snapshot_families
    from distmon.formats import mfu_text
    from distmon.options import Options
    from distmon.producers import ProducerSet, make_producers
    from distmon.render.view_model import ROW_COLUMNS, job_rows

    options = Options(logdirs=(logdir,), no_gpu=True, poll=True)
    snap = ProducerSet(make_producers(options), options).read_once()
    (row,) = job_rows(snap.jobs)
    assert row.cells()[ROW_COLUMNS.index("mfu")] == mfu_text(mfu) != "–"
    family = next(f for f in snapshot_families(snap) if f.name == "distmon_mfu_ratio")
    assert [(s.labels, s.value) for s in family.samples] == [({"job": "mfu"}, pytest.approx(mfu))]
