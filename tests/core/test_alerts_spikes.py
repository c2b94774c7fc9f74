"""The loss-spike rule: a loss far above the median and MAD of its recent window, judged by
where the loss is now (table-tested); its pruned search equal to every point's own median
(hypothesis); and a real `distmon --once --json` / `--check` over event files."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcore import names
from distcore.alerts.series import LOSS_SPIKE_FACTOR, LOSS_SPIKE_Z, loss_spike, series_alerts
from distcore.alerts.spikes import newest_spike, window_spike
from tests.core import oracle_rules as oracle
from tests.tui import fixed

ROOT = Path(__file__).resolve().parents[2]
STEADY = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02, 0.98, 1.0, 1.01]


def loss_run(values: Sequence[float], tag: str = names.LOSS) -> Any:
    return fixed.run("r", fixed.series(tag, values, step_every=1))


@pytest.mark.parametrize(
    ("values", "severity", "said"),
    [
        (STEADY, None, ""),
        ([*STEADY, 2.9], None, ""),  # under 3x its median (1.0)
        ([*STEADY, 6.6e10], "warning", "if it does not come back"),  # the next point decides
        ([*STEADY, 6.6e10, 1.0, 0.97], "warning", "it recovered by itself (now 0.97)"),
        ([*STEADY, 6.6e10, 2.3, 2.3], "critical", "has not come back (now 2.3)"),  # chance
        ([*STEADY, 5.0, 5.0], "critical", "has not come back (now 5)"),  # up for two points
        ([*STEADY, 5.0, 1.4], "warning", "recovered by itself"),  # within 1.5x of the median
        ([1.0, 3.0] * 10 + [6.5], None, ""),  # a noisy loss: within 10 robust deviations
        ([0.0100, 0.0101, 0.0099] * 4 + [0.0105], None, ""),  # a flat one: far under 3x
        ([2.3 * math.exp(-k / 8) for k in range(84)], None, ""),  # fast descent is no spike
        ([1.0, math.nan, 1.0, 1.0, 1.0, 1.0, 1.0, 10.0, 1.0], "warning", "recovered"),
        ([1.0, 1.0, 1.0, 50.0], None, ""),  # too few points before it for a median
        ([*STEADY, math.inf], None, ""),  # a non-finite loss is loss_nan's
        ([-5.0, -5.1, -4.9] * 4 + [20.0, -5.0], "warning", "far above its recent median -5"),
        ([*STEADY, 6.6e10, *STEADY * 8], None, ""),  # past the tail: gone
    ],
)
def test_loss_spike(values: list[float], severity: str | None, said: str) -> None:
    found = loss_spike(loss_run(values))
    assert (found.severity if found is not None else None) == severity
    if found is not None:
        assert found.kind == "loss_spike" and said in found.message, found.message
        assert found in series_alerts(loss_run(values))
        assert found == oracle.loss_spike(loss_run(values))


def test_the_spike_named_is_the_newest_with_its_step_and_ratio() -> None:
    found = loss_spike(loss_run([*STEADY, 20.0, *STEADY, 30.0, 1.0], tag="epoch_loss"))
    assert found is not None
    assert found.message.startswith(f"loss spike: epoch_loss 30 at step {2 * len(STEADY) + 1} "
                                    "is 30× its recent median 1")  # fmt: skip
    assert found.since == fixed.NOW - 1 - 2.0  # the spike's own wall time, not the newest


VALUES = st.one_of(st.floats(0.5, 1.5), st.floats(-1e3, 1e12), st.just(math.nan),
                   st.sampled_from([0.0, 1.0, 3.0, -2.0, 1e10, math.inf]))  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(VALUES, max_size=100), st.integers(0, 90))
def test_the_pruned_search_finds_what_every_points_median_finds(
    values: list[float], start: int
) -> None:
    plain = next((found for i in range(len(values) - 1, max(start, 5) - 1, -1)
                  if (found := window_spike(values, i, 20, 5, LOSS_SPIKE_Z, LOSS_SPIKE_FACTOR))),
                 None)  # fmt: skip
    assert newest_spike(values, start, 20, 5, LOSS_SPIKE_Z, LOSS_SPIKE_FACTOR) == plain


@settings(max_examples=150, deadline=None)
@given(st.lists(VALUES, max_size=100))
def test_the_rule_is_the_plain_rule(values: list[float]) -> None:
    run = loss_run(values) if values else loss_run([1.0])
    assert loss_spike(run) == oracle.loss_spike(run)


def test_a_sweep_decides_its_spikes_at_once_as_one_by_one() -> None:
    """Many full tails (flat, falling, noisy, some spiking): the batch bound leaves the spiking
    ones to the rule, and the sweep's alerts are the one-by-one rules' own."""
    import numpy as np

    from distcore import tails
    from distcore.events.snapshots import RunSnapshot
    from distcore.location import RunLocation
    from tests.core.test_index_oracle import _series

    rng = np.random.default_rng(5)
    points = 84
    walls = [1000.0 + i for i in range(points)]
    runs, spiky = [], set()
    for i in range(6 * tails.BATCH_MIN):
        shape = i % 3
        base = (2.3 * np.exp(-np.arange(points) / 15) + 0.05 * rng.random(points) if shape == 0
                else 0.3 + 0.02 * rng.random(points) if shape == 1
                else 0.3 * np.exp(0.3 * rng.standard_normal(points)))  # fmt: skip
        values = base.tolist()
        if i % 5 == 0:
            values[int(rng.integers(30, points))] = 1e4
            spiky.add(i)
        runs.append(RunSnapshot(name=f"r{i}", path=RunLocation.on_this_machine(f"/l/r{i}"),
                                status="live", files=1, problems=(), hparams={},
                                scalars={"loss": _series("loss", values, walls)},
                                last_update=walls[-1]))  # fmt: skip
    calm = tails.quiet_spikes(runs)
    assert not calm & spiky and len(calm) > len(runs) // 2  # the bound decides most
    found = tails.series_alerts_many(runs)
    assert found == [series_alerts(r) for r in runs] == [oracle.series_alerts(r) for r in runs]
    assert {i for i, f in enumerate(found) if any(a.kind == "loss_spike" for a in f)} == spiky


# --- through distmon ---------------------------------------------------------------------------


def write_loss(logdir: Path, name: str, values: Sequence[float]) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(logdir / name / "train"))
    start = time.time() - len(values)
    for step, value in enumerate(values):
        writer.add_scalar("loss", value, step, walltime=start + step)
    writer.close()
    (logdir / name / "run.json").write_text(json.dumps({"status": "finished"}))


def test_once_json_names_a_spike_that_recovered_and_one_that_did_not(tmp_path: Path) -> None:
    """A finished run whose loss jumped to 6.6e10 and fell back to chance is critical; one that
    came back to its level is a warning, not silence; --check exits 1."""
    logdir = tmp_path / "logs"
    before = [2.3 * math.exp(-k / 20) + 0.3 for k in range(60)]
    write_loss(logdir, "chance", [*before, 6.6e10, 2.3, 2.31, 2.29])
    write_loss(logdir, "came-back", [*before, 6.6e10, *before[-3:]])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("shared", "tui"))}

    def distmon(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "distmon", "--once", "--no-gpu", *args,
                               str(logdir)], capture_output=True, text=True, env=env, timeout=120,
                              check=False)  # fmt: skip

    done = distmon("--json")
    assert done.returncode == 0, done.stderr
    spikes = {a["run"]: a for a in json.loads(done.stdout)["alerts"] if a["kind"] == "loss_spike"}
    assert {r: a["severity"] for r, a in spikes.items()} == {
        "chance/train": "critical", "came-back/train": "warning"}  # fmt: skip
    assert "6.6e+10 at step 60" in spikes["chance/train"]["message"]
    assert "recovered by itself" in spikes["came-back/train"]["message"]
    assert distmon("--check").returncode == 1  # the critical one
