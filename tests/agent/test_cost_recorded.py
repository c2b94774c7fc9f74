"""A job's cost end to end: the real recorder writes two simulated GPUs' energy counters (and a
RAPL host's, from a sysfs tree in tmp_path) into the job's `system/` run beside a run.json with
its ledger and `[cost]` prices; `distmon --once --json --price-gpu-hour 2.5` reads them back:
its price wins, the job's own kWh price fills the other, and the figures agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distagent.system_record import SystemRecorder
from distcore import names
from distcore.jobs.ledger import BUCKETS
from distcore.telemetry import TelemetrySource
from distcore.telemetry.host import PsutilHostReader
from distcore.telemetry.rapl import RaplReader
from distcore.telemetry.simulated import SimulatedGpuSource
from tests.agent.test_system_record import counting_clock, read_scalars
from tests.kit.wait import wait_until

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
WALL = 7200.0
LEDGER = {**dict.fromkeys(BUCKETS, 0.0), "compute": 2700.0, "input_wait": 4500.0}


def distmon(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distmon", *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=ENV)


@pytest.fixture(scope="module")
def recorded_job(tf: Any, tmp_path_factory: Any) -> tuple[Path, dict[str, list[float]]]:
    root = tmp_path_factory.mktemp("cost")
    powercap = root / "powercap" / "intel-rapl:0"
    powercap.mkdir(parents=True)
    (powercap / "energy_uj").write_text("123456789")
    (powercap / "max_energy_range_uj").write_text("262143328850")
    job = root / "logs" / "job"
    source = TelemetrySource(SimulatedGpuSource(2, clock=counting_clock()),
                             PsutilHostReader(rapl=RaplReader(root / "powercap")),
                             clock=counting_clock())
    recorder = SystemRecorder(job, interval=0.05, source=source)
    recorder.start()
    try:
        wait_until(lambda: recorder.written >= 4, "four samples written")
    finally:
        recorder.close()
    source.close()
    assert recorder.written >= 4
    (job / names.RUN_JSON).write_text(json.dumps({
        "status": "finished", "ledger": LEDGER, "ledger_wall": WALL,
        "config": {"cost": {"price_gpu_hour": 9.0, "price_kwh": 0.3}},
    }))
    scalars = read_scalars(job / names.SYSTEM_DIR)
    return root / "logs", {t: [v for _, v in p] for t, p in scalars.items()}


def test_recorded_energy_and_prices_make_the_cost(
        recorded_job: tuple[Path, dict[str, list[float]]]) -> None:
    logdir, scalars = recorded_job
    energy = [names.gpu_tag(i, names.GPU_ENERGY) for i in (0, 1)]
    assert set(energy) | {names.HOST_ENERGY_JOULES} <= set(scalars)
    assert scalars[names.HOST_ENERGY_JOULES][0] == 0.0  # RAPL's counter starts with the job
    joules = sum(scalars[t][-1] - scalars[t][0] for t in energy)
    assert joules > 0

    done = distmon("--once", "--json", "--no-gpu", "--price-gpu-hour", "2.5", logdir)
    assert done.returncode == 0, done.stderr
    (job,) = json.loads(done.stdout)["jobs"]
    cost = job["cost"]
    kwh = joules / 3.6e6
    assert cost["gpus"] == 2 and cost["gpu_hours"] == pytest.approx(WALL * 2 / 3600)
    assert cost["gpu_hours_by_bucket"]["input_wait"] == pytest.approx(2.5)
    assert cost["energy_kwh"] == pytest.approx(kwh, rel=1e-6)
    assert cost["money"] == pytest.approx(4.0 * 2.5 + kwh * 0.3, rel=1e-6)  # flag, then run.json
    assert cost["not_compute"] == pytest.approx(0.625) and cost["why"] == {}

    from distcore.jobs.snapshots import Prices
    from distmon.widgets.panels import render_details
    from tests.core.test_jobs_index import index_over, snapshot

    index, _ = index_over(logdir)
    (shown,) = snapshot(index).jobs
    details = render_details(shown, (), Prices(2.5)).plain.splitlines()
    below = details[details.index(next(d for d in details if d.startswith("time wall"))) + 1]
    assert below.startswith("cost 4 GPU-hours (2 GPUs), ") and "of it was not compute" in below

    text = distmon("--once", "--no-gpu", logdir)
    assert text.returncode == 0, text.stderr
    own = 4.0 * 9.0 + kwh * 0.3  # no flag: the job's own prices
    assert f"  cost: 4 GPU-hours (2 GPUs), {kwh:.3g} kWh, ${own:,.2f}; 62% of it was not " \
           "compute" in text.stdout


def test_the_metrics_carry_the_cost_in_base_units(
        recorded_job: tuple[Path, dict[str, list[float]]]) -> None:
    from distcore.metrics import snapshot_families
    from tests.core.test_jobs_index import index_over, snapshot

    logdir, _ = recorded_job
    index, _ = index_over(logdir, prices=(2.5, None))
    families = {f.name: f for f in snapshot_families(snapshot(index))}
    value = {n: families[n].samples[0].value for n in
             ("distmon_job_gpu_seconds", "distmon_job_energy_joules", "distmon_job_cost_usd")}
    assert value["distmon_job_gpu_seconds"] == pytest.approx(WALL * 2)
    kwh = value["distmon_job_energy_joules"] / 3.6e6
    assert value["distmon_job_cost_usd"] == pytest.approx(4.0 * 2.5 + kwh * 0.3)


def test_the_agent_configs_prices_are_what_distmon_reads() -> None:
    """distagent's `[cost]` keys reach run.json's `config` as written: 0 is no price."""
    from distagent.config import config_from_dict, config_to_dict
    from distcore.jobs.agent import recorded_prices
    from distcore.jobs.snapshots import Prices

    given = config_from_dict({"cost": {"price_gpu_hour": 2.5}})
    written = json.loads(json.dumps(config_to_dict(given)))
    assert recorded_prices(written) == Prices(2.5, None)
    assert recorded_prices(config_to_dict(config_from_dict({}))) == Prices()
    odd: list[Any] = [None, [], {"cost": "x"}, {"cost": {"price_kwh": -1, "price_gpu_hour": "2"}}]
    for doc in odd:
        assert recorded_prices(doc) == Prices()


@pytest.mark.parametrize("args", [("--price-gpu-hour", "-1"), ("--price-kwh", "nan"),
                                  ("--price-kwh", "1e7"), ("--price-gpu-hour", "two")])
def test_a_bad_price_is_one_line_and_exit_2(args: tuple[str, str], tmp_path: Path) -> None:
    done = distmon("--once", *args, tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "USD per" in done.stderr


@pytest.mark.parametrize("mode", [("--once",), ("--once", "--json"), ("--serve", "--metrics", "0")])
def test_the_prices_go_with_once_and_serve(mode: tuple[str, ...], tmp_path: Path) -> None:
    from distmon.arguments import parse_options

    options = parse_options([*mode, "--price-gpu-hour", "2.5", "--price-kwh", "0", str(tmp_path)])
    assert (options.price_gpu_hour, options.price_kwh) == (2.5, 0.0)
    assert parse_options([*mode, str(tmp_path)]).price_gpu_hour is None
