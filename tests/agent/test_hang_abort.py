"""`cluster.on_hang = "abort"` on a real job stuck in the user's model: the worker dumps its
stacks, ends run.json `hung` with its last checkpoint kept, exits with code 3, and distmon
raises `hung` for the ended job. One process (the multi-worker hang is test_multiworker_hang).

Another account that can write the run directory plants a FIFO or a link where the stacks go:
a FIFO used to block the heartbeat thread in `open`, so the job never aborted (and ignored
SIGTERM); a link had the dump overwrite the file it points to. The stacks now replace either."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distagent.train.heartbeat import EXIT_HUNG
from distcore import names
from tests.agent.stuck_model import STUCK_AFTER_ENV
from tests.agent.test_multiworker import child_env, latest_checkpoint_step

pytestmark = pytest.mark.slow

CONFIG = """
[run]
name = "abort"
logdir = "{logdir}"
[data]
source = "synthetic"
per_replica_batch_size = 4
validation_fraction = 0.0
[data.synthetic]
num_examples = 400
num_classes = 4
input_shape = [4]
[model]
name = "tests.agent.stuck_model:stuck_mlp"
[train]
epochs = 1
steps_per_epoch = 50
log_every_steps = 1
checkpoint_every_steps = 2
[cluster]
# Well above a slow step on a loaded machine (a first checkpoint, a retrace), far below the test.
hang_seconds = 5.0
on_hang = "abort"
"""


SECRET = "another account's file\n"


def plant(stacks: Path, kind: str, secret: Path) -> None:
    stacks.parent.mkdir(parents=True)
    secret.write_text(SECRET)
    secret.chmod(0o600)
    if kind == "fifo":
        os.mkfifo(stacks, 0o666)
    else:
        stacks.symlink_to(secret)


@pytest.mark.parametrize("planted", ["fifo", "link"])
def test_abort_ends_the_job_hung_and_keeps_its_checkpoint(tmp_path: Path, planted: str) -> None:
    logdir = tmp_path / "runs"
    secret = tmp_path / "secret.txt"
    plant(logdir / "abort" / names.stacks_name(0), planted, secret)
    config = tmp_path / "abort.toml"
    config.write_text(CONFIG.format(logdir=logdir))
    done = subprocess.run([sys.executable, "-m", "distagent", "start", str(config)],
                          capture_output=True, text=True, timeout=120,
                          env={**child_env(), STUCK_AFTER_ENV: "5"})  # blocks in step 6
    run_dir = logdir / "abort"
    assert done.returncode == EXIT_HUNG, done.stdout[-2000:] + done.stderr[-2000:]
    assert "no step has ended for" in done.stderr and "hung: no step ended for 5 s after " \
        "step 5" in done.stderr, done.stderr[-2000:]
    record = json.loads((run_dir / names.RUN_JSON).read_text())
    assert (record["status"], record["last_step"]) == (names.STATUS_HUNG, 5)
    assert names.stacks_name(0) in record["message"]
    stacks = run_dir / names.stacks_name(0)
    assert not stacks.is_symlink() and stacks.is_file()  # what was planted is replaced
    assert "in wait_for_the_remote_service" in stacks.read_text()
    assert secret.read_text() == SECRET and secret.stat().st_mode & 0o777 == 0o600
    assert latest_checkpoint_step(run_dir) == 4  # the last one, kept: a restart resumes there
    once = subprocess.run(
        [sys.executable, "-m", "distmon", "--once", "--json", "--no-gpu", str(logdir)],
        capture_output=True, text=True, timeout=60, env=child_env())
    doc = json.loads(once.stdout)
    [hung] = [a for a in doc["alerts"] if a["kind"] == "hung"]
    assert hung["severity"] == "critical" and "job ended hung at step 5" in hung["message"]
    assert doc["jobs"][0]["status"] == names.STATUS_HUNG
