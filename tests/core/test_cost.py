"""What a job costs: the pure function over its ledger, GPUs and energy; the energy counters it
reads (NVML's through the fake pynvml, RAPL's on a sysfs tree in tmp_path, the simulated GPUs');
hostile figures never give a negative or infinite cost."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import pynvml
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distcore.jobs.cost import (
    JOULES_PER_KWH,
    NO_COUNTER,
    NO_GPUS,
    NO_PRICE,
    NO_SAMPLES,
    cost_of,
    counter_rise,
)
from distcore.jobs.ledger import BUCKETS, Ledger
from distcore.jobs.snapshots import Prices
from distcore.telemetry.nvml import NvmlGpuSource
from distcore.telemetry.rapl import RaplReader
from distcore.telemetry.simulated import energy_joules, power_w, simulated_device
from tests.core.fake_pynvml import FakeGpu, FakeNvml


def ledger(wall: float | None = 3600.0, compute: float | None = 1800.0) -> Ledger:
    buckets: dict[str, float | None] = dict.fromkeys(BUCKETS, 0.0)
    buckets["compute"] = compute
    if wall is not None and compute is not None:
        buckets["unknown"] = wall - compute
    return Ledger("agent", buckets, wall)


KWH = JOULES_PER_KWH


@pytest.mark.parametrize(
    ("gpus", "joules", "prices", "hours", "kwh", "money", "why"),
    [
        (8, 2 * KWH, Prices(2.5, 0.1), 8.0, 2.0, 8 * 2.5 + 2 * 0.1, {}),
        (8, None, Prices(2.5), 8.0, None, 20.0, {"energy": NO_COUNTER}),
        # a kWh price with the energy unknown: no bill, rather than a part of one
        (8, None, Prices(2.5, 0.1), 8.0, None, None,
         {"energy": NO_COUNTER, "money": "energy unknown"}),
        (8, 2 * KWH, Prices(), 8.0, 2.0, None, {"money": NO_PRICE}),
        (0, KWH, Prices(kwh=0.2), None, 1.0, pytest.approx(0.2), {"gpu_hours": NO_GPUS}),
        (0, None, Prices(2.5), None, None, None,
         {"gpu_hours": NO_GPUS, "energy": NO_COUNTER, "money": "GPU-hours unknown"}),
        (None, None, Prices(), None, None, None,
         {"gpu_hours": NO_SAMPLES, "energy": NO_COUNTER, "money": NO_PRICE}),
        (1, 0.0, Prices(0.0, 0.0), 1.0, 0.0, 0.0, {}),  # free is a price, zero a known cost
    ],
)
def test_cost_of(gpus: int | None, joules: float | None, prices: Prices, hours: float | None,
                 kwh: float | None, money: Any, why: dict[str, str]) -> None:
    cost = cost_of(ledger(), gpus, joules, prices)
    assert (cost.gpu_hours, cost.energy_kwh, cost.money, dict(cost.why)) == \
        (hours, kwh, money, why)
    assert cost.not_compute == pytest.approx(0.5)
    if hours is not None:
        assert cost.bucket_gpu_hours["compute"] == pytest.approx(hours / 2)
        assert sum(v or 0.0 for v in cost.bucket_gpu_hours.values()) == pytest.approx(hours)


def test_an_unknown_wall_has_no_gpu_hours_and_no_share() -> None:
    cost = cost_of(ledger(wall=None, compute=None), 4, None, Prices(1.0))
    assert cost.gpu_hours is None and cost.why["gpu_hours"] == "wall time unknown"
    assert cost.not_compute is None and cost.money is None


@pytest.mark.parametrize(("values", "rise"), [
    ([10.0, 20.0, 35.0], 25.0),
    ([10.0, 20.0, 5.0, 15.0], 20.0),  # a reset: the fall adds nothing, the rises after count
    ([10.0, math.nan, 20.0, math.inf, -5.0, 30.0], 20.0),  # unreadable points skipped
    ([1e300, 10.0, 20.0], 10.0),  # past any counter: skipped
    ([5.0], 0.0),
    ([], 0.0),
])
def test_counter_rise(values: list[float], rise: float) -> None:
    assert counter_rise(values) == rise


hostile = st.one_of(st.none(), st.floats(), st.integers(-10**30, 10**30))


@given(wall=hostile, compute=hostile, gpus=st.one_of(st.none(), st.integers(-5, 10**6)),
       joules=hostile, gpu_price=hostile, kwh_price=hostile,
       counter=st.lists(st.floats(), max_size=6))
def test_hostile_figures_never_cost_a_negative_or_infinite(
        wall: Any, compute: Any, gpus: int | None, joules: Any, gpu_price: Any, kwh_price: Any,
        counter: list[float]) -> None:
    from distcore.jobs.ledger import ledger_from_record

    made = ledger_from_record({"ledger": {"compute": compute}, "ledger_wall": wall})
    for energy in (joules, counter_rise(counter)):
        cost = cost_of(made, gpus, energy, Prices(gpu_price, kwh_price))
        for figure in (cost.gpu_hours, cost.energy_kwh, cost.money,
                       *cost.bucket_gpu_hours.values()):
            assert figure is None or (math.isfinite(figure) and figure >= 0)


def rapl_tree(root: Path, zones: dict[str, tuple[str, str]]) -> Path:
    """A powercap directory: zone -> (energy_uj, max_energy_range_uj) file contents."""
    for zone, (energy, span) in zones.items():
        (root / zone).mkdir(parents=True)
        (root / zone / "energy_uj").write_text(energy)
        (root / zone / "max_energy_range_uj").write_text(span)
    return root


def set_energy(root: Path, zone: str, value: str) -> None:
    (root / zone / "energy_uj").write_text(value)


def test_rapl_adds_packages_not_their_subzones_and_wraps(tmp_path: Path) -> None:
    root = rapl_tree(tmp_path, {"intel-rapl:0": ("1000000\n", "5000000\n"),
                                "intel-rapl:1": ("0\n", "5000000\n"),
                                "intel-rapl:0:0": ("1\n", "5000000\n")})  # cores: in package 0
    reader = RaplReader(root)
    assert reader.read() == 0.0  # the first reading starts the counter
    set_energy(root, "intel-rapl:0", "3000000")
    set_energy(root, "intel-rapl:0:0", "4000000")
    set_energy(root, "intel-rapl:1", "500000")
    assert reader.read() == pytest.approx(2.5)
    set_energy(root, "intel-rapl:0", "1000000")  # wrapped at 5 J: 2 J to the top, then 1 J
    assert reader.read() == pytest.approx(5.5)


@pytest.mark.parametrize("energy", ["", "-5", "12abc", "9" * 40])
def test_rapl_odd_files_are_unknown(tmp_path: Path, energy: str) -> None:
    root = rapl_tree(tmp_path, {"intel-rapl:0": (energy, "5000000")})
    assert RaplReader(root).read() is None


def test_rapl_without_powercap_or_a_range_is_never_negative(tmp_path: Path) -> None:
    assert RaplReader(tmp_path / "absent").read() is None
    root = rapl_tree(tmp_path / "pc", {"intel-rapl:0": ("9000000", "garbage")})
    reader = RaplReader(root)
    reader.read()
    set_energy(root, "intel-rapl:0", "1000000")  # back, and no range to wrap at
    assert reader.read() == 0.0


def test_rapl_unreadable_as_on_linux_since_5_10(tmp_path: Path) -> None:
    import os

    root = rapl_tree(tmp_path, {"intel-rapl:0": ("1000", "5000000")})
    (root / "intel-rapl:0" / "energy_uj").chmod(0)
    if os.access(root / "intel-rapl:0" / "energy_uj", os.R_OK):
        pytest.skip("running as root: every file is readable")
    assert RaplReader(root).read() is None


@pytest.mark.parametrize("index", [0, 1, 5])
def test_simulated_energy_grows_as_the_power_says(index: int) -> None:
    step = 0.05
    times = [i * step for i in range(int(400 / step))]
    counters = [energy_joules(t, index) for t in times]
    assert all(b >= a for a, b in itertools.pairwise(counters))
    integral = sum(power_w(t, index) for t in times) * step
    assert counters[-1] - counters[0] == pytest.approx(integral, rel=1e-3)
    assert simulated_device(100.0, index).energy_joules == energy_joules(100.0, index)


def test_nvml_energy_and_its_absence_before_volta() -> None:
    volta = FakeGpu(energy_mj=7_200_000)
    pascal = FakeGpu(architecture=pynvml.NVML_DEVICE_ARCH_PASCAL)
    source = NvmlGpuSource(FakeNvml([volta, pascal]), pcie=False)
    try:
        status, (new, old) = source.read()
    finally:
        source.close()
    assert status.available
    assert new.energy_joules == 7200.0
    assert old.energy_joules is None and old.power_w is not None  # the rest still read
    with pytest.raises(pynvml.NVMLError_NotSupported):
        FakeNvml([pascal]).nvmlDeviceGetTotalEnergyConsumption(pascal)


def test_hostile_recorded_counters_through_the_index(tmp_path: Path) -> None:
    """A system run whose energy counter claims 1e20 J, goes negative, NaN and backwards:
    only its readable rises count, and the JSON and metrics stay finite and non-negative."""
    import json

    from tensorboardX import SummaryWriter

    from distcore import names
    from distcore.jobs.jsonify import to_json
    from distcore.metrics import snapshot_families
    from tests.core.test_jobs_index import index_over, snapshot

    writer = SummaryWriter(str(tmp_path / "job" / names.SYSTEM_DIR))
    counter = [1e20, -5.0, 100.0, 50.0, 80.0, math.nan, math.inf]
    for step, value in enumerate(counter):
        writer.add_scalar(names.gpu_tag(0, names.GPU_ENERGY), value, step, walltime=1.7e9 + step)
        writer.add_scalar(names.gpu_tag(0, "utilization"), 50.0, step, walltime=1.7e9 + step)
    writer.close()
    (tmp_path / "job" / names.RUN_JSON).write_text(json.dumps(
        {"status": "finished", "ledger": {"compute": 1800.0}, "ledger_wall": 3600.0}))
    index, _ = index_over(tmp_path, prices=(1.0, 1e6))
    snap = snapshot(index)
    (job,) = to_json(snap)["jobs"]
    assert job["cost"]["gpus"] == 1 and job["cost"]["gpu_hours"] == 1.0
    assert job["cost"]["energy_kwh"] == pytest.approx(30.0 / JOULES_PER_KWH)
    assert job["cost"]["money"] == pytest.approx(1.0 + 30.0 / JOULES_PER_KWH * 1e6)
    for family in snapshot_families(snap):
        if family.name.startswith("distmon_job_"):
            assert all(math.isfinite(s.value) and s.value >= 0 for s in family.samples)
