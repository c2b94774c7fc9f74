"""A real two-worker `distagent launch-local` job with simulated GPUs, seen by both front ends.

Each worker records its own `system/worker-<i>/` run; `distmon --once --json` must list both
workers under `hosts` with their GPUs, and the dashboard's GPU panel must show both, after this
machine's own host. One job serves every test here (TensorFlow starts in each worker: slow).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from distcore import names
from distmon.app import DistmonApp
from distmon.options import Options
from distmon.widgets.panels import Panel
from tests.agent.test_multiworker import child_env, write_config
from tests.kit.wait import until

pytestmark = pytest.mark.slow
SIMULATED = 2


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("mw-hosts")
    config = write_config(tmp_path, steps=4)
    with config.open("a") as out:
        out.write(f"[telemetry]\nsimulate_gpus = {SIMULATED}\ninterval_seconds = 0.2\n")
    done = subprocess.run(
        [sys.executable, "-m", "distagent", "launch-local", str(config), "--workers", "2"],
        capture_output=True, text=True, env=child_env(), timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return tmp_path / "runs"


def test_each_worker_records_its_own_simulated_gpus(logdir: Path) -> None:
    from distcore.events import load_once

    runs = {r.name: r for r in load_once([logdir])}
    for worker in (0, 1):
        system = runs[f"mw/{names.worker_system_dir(worker)}"]
        assert dict(system.hparams) == {
            "host": socket.gethostname(), "worker": worker, "simulated_gpus": SIMULATED
        }  # fmt: skip
        assert {names.gpu_tag(i, "utilization") for i in range(SIMULATED)} <= set(system.scalars)


def test_once_json_lists_both_workers_under_hosts(logdir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "distmon", "--once", "--json", "--no-gpu", str(logdir)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    hosts = json.loads(done.stdout)["hosts"]
    assert hosts[0]["source"] == "local"
    workers = sorted((h for h in hosts if h["source"] == "logdir"), key=lambda h: h["worker"])
    assert [(h["worker"], h["job"], h["name"]) for h in workers] == [
        (0, "mw", socket.gethostname()), (1, "mw", socket.gethostname())
    ]  # fmt: skip
    for host in workers:
        assert host["simulated"] and len(host["gpus"]) == SIMULATED
        assert all(0 <= g["utilization_gpu"] <= 100 for g in host["gpus"])
        assert host["age_seconds"] >= 0 and host["cpu_percent"] is not None


async def test_the_gpu_panel_lists_both_workers(logdir: Path) -> None:
    app = DistmonApp(Options(logdirs=(logdir,), refresh=0.2, no_gpu=True))
    async with app.run_test(size=(160, 48)) as pilot:
        panel = app.query_one("#gpus", Panel)
        # Both workers' system runs land in either order as the first read goes on.
        await until(pilot, lambda: "worker 0" in str(panel.render())
                    and "worker 1" in str(panel.render()), "both workers' GPUs", every=0.1)
        text = str(panel.render())
        lines = text.splitlines()
        headings = [i for i, line in enumerate(lines) if "simulated" in line and "worker" in line]
        assert [("worker 0" in lines[i], "worker 1" in lines[i]) for i in headings] == [
            (True, False), (False, True)
        ], text  # fmt: skip
        assert lines[0].startswith("no GPU")  # this machine first (--no-gpu), then the workers
        for i in headings:  # each worker's heading is followed by its simulated GPUs
            assert [line.split()[0] for line in lines[i + 1 : i + 1 + SIMULATED]] == ["0", "1"]


