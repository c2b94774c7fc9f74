"""The loss-spike rule: a loss far above the median and MAD of its recent window, judged by
where the loss is now, and every spike a run had remembered (table-tested); the store's
tracker, fed in batches and bounded by numpy, equal to every point's own median (hypothesis);
and a real `distmon --once` / `--json` / `--check` over event files of finished runs."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcore import names
from distcore.alerts.series import LOSS_SPIKE_RULE, loss_spike, series_alerts
from distcore.alerts.spikes import BLOCK, KEPT, SpikeHistory, SpikeTracker
from distcore.tails import spike_candidates
from tests.core import oracle_rules as oracle
from tests.kit.writers import write_job
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
        # Long past: still told, a warning that it recovered (the rule once looked at the last
        # 64 points only, and fell silent).
        ([*STEADY, 6.6e10, *STEADY * 8], "warning", "recovered by itself (now 1.01)"),
        # Two spikes, both back: the newest first, the earlier after it.
        ([*STEADY, 8.0, *STEADY * 3, 9.0, *STEADY], "warning",
         "9 at step 41 is 9× its recent median 1; it recovered by itself (now 1.01); earlier: "
         "loss spiked at step 10 (1→8), recovered at step 11"),
        # An earlier spike to chance that never came back keeps it critical, whatever the newest.
        ([*STEADY, 6.6e10, *[2.3] * 30, 23.0, 2.3], "critical", "loss spiked at step 10 "
         "(1→6.6e+10), has not come back"),
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


def fed(values: Sequence[float], cuts: Sequence[int]) -> SpikeHistory:
    """A tracker fed `values` in batches cut at `cuts`, each bounded as the store bounds it."""
    tracker = SpikeTracker(LOSS_SPIKE_RULE)
    rule, edges = LOSS_SPIKE_RULE, [0, *sorted(c for c in cuts if 0 < c < len(values)),
                                    len(values)]
    for lo, hi in itertools.pairwise(edges):
        batch = np.array(values[lo:hi], dtype=np.float64)
        # Longer batches bounded by numpy's blocks, shorter by the tracker's own one bound.
        candidates = spike_candidates(tracker.recent(), batch, rule.window, rule.min_points,
                                      BLOCK, rule.factor) if hi - lo >= 8 else None
        tracker.feed(list(range(lo, hi)), [float(i) for i in range(lo, hi)], batch.tolist(),
                     candidates)
    return tracker.history()


@settings(max_examples=300, deadline=None)
@given(st.lists(VALUES, max_size=120), st.lists(st.integers(0, 120), max_size=4))
def test_the_tracker_in_batches_finds_what_every_points_median_finds(
    values: list[float], cuts: list[int]
) -> None:
    history = fed(values, cuts)
    plain = oracle.loss_spikes(range(len(values)), values)
    assert history.count == len(plain)
    assert [(s.step, s.back_step) for s in history.spikes] == plain[-KEPT:]
    assert history.last_spiked == (
        bool(values) and oracle._loss_spike_at(values, len(values) - 1) is not None)


@settings(max_examples=150, deadline=None)
@given(st.lists(VALUES, max_size=100))
def test_the_rule_is_the_plain_rule(values: list[float]) -> None:
    run = loss_run(values) if values else loss_run([1.0])
    assert loss_spike(run) == oracle.loss_spike(run)


@pytest.mark.parametrize(("values", "expect", "count"), [
    # A spike at step 150 of 300 that came back three steps later.
    ([*STEADY * 15, 12.0, 11.0, 9.0, *STEADY * 15][:300], [(150, 153)], 1),
    # One that has not come back (yet).
    ([*STEADY * 3, 9.0, 9.5, 9.2], [(30, None)], 1),
    # More than KEPT: the newest kept, all counted (the last is the newest point: not back).
    ([v for _ in range(20) for v in [*STEADY, 50.0]],
     [(11 * i + 10, 11 * i + 11) for i in range(4, 19)] + [(219, None)], 20),
    ([*STEADY * 30], [], 0),  # a calm loss
])
def test_the_tracker_keeps_each_stretch_and_its_return(
        values: list[float], expect: list[tuple[int, int | None]], count: int) -> None:
    for cuts in ([], [7, 151, 152], list(range(0, len(values), 16))):
        history = fed(values, cuts)
        assert [(s.step, s.back_step) for s in history.spikes] == expect
        assert history.count == count


def test_a_restart_forgets_the_spikes_after_it() -> None:
    tracker = SpikeTracker(LOSS_SPIKE_RULE)
    values = [*STEADY * 2, 40.0, *STEADY, 50.0, *STEADY]
    tracker.feed(list(range(len(values))), [0.0] * len(values), values)
    assert [s.step for s in tracker.history().spikes] == [20, 31]
    tracker.purge_from(25, values[:25])  # the job resumed from step 25
    assert [(s.step, s.back_step) for s in tracker.history().spikes] == [(20, 21)]
    assert tracker.history().count == 1
    tracker.feed([25, 26], [0.0, 0.0], [1.0, 1.0])
    assert [s.step for s in tracker.history().spikes] == [20]


def test_a_sweep_decides_its_spikes_at_once_as_one_by_one() -> None:
    """Many runs (flat, falling, noisy, some spiking): the batch rules' alerts are the
    one-by-one rules' own and the plain rules'."""
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
    found = tails.series_alerts_many(runs)
    assert found == [series_alerts(r) for r in runs] == [oracle.series_alerts(r) for r in runs]
    assert spiky <= {i for i, f in enumerate(found) if any(a.kind == "loss_spike" for a in f)}


# --- through distmon ---------------------------------------------------------------------------


def test_once_json_names_a_spike_that_recovered_and_one_that_did_not(tmp_path: Path) -> None:
    """A finished run whose loss jumped to 6.6e10 and fell back to chance is critical; one that
    came back to its level is a warning, not silence; --check exits 1."""
    logdir = tmp_path / "logs"
    before = [2.3 * math.exp(-k / 20) + 0.3 for k in range(60)]
    write_job(logdir, "chance", [*before, 6.6e10, 2.3, 2.31, 2.29], "finished")
    write_job(logdir, "came-back", [*before, 6.6e10, *before[-3:]], "finished")
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


def spike_at_150(steps: int) -> list[float]:
    """A falling loss with noise, spiking at step 150 and back three steps later."""
    rng = np.random.default_rng(7)
    values = (2.0 * np.exp(-np.arange(steps) / 80) + 0.3 + 0.01 * rng.random(steps)).tolist()
    values[150:153] = [12.3, 9.0, 4.0]
    return values


@pytest.mark.parametrize("steps", [300, 5000])  # 5,000: the store keeps 2,000, decimated
def test_a_finished_runs_recovered_spike_is_told_when_first_read(
        tmp_path: Path, steps: int) -> None:
    """The run is read after it finished, its spike 150 steps (or 4,850) behind its end: the
    text report, the JSON's alert and the loss's `spikes` all tell it, a warning."""
    logdir = tmp_path / "logs"
    write_job(logdir, "late", spike_at_150(steps), "finished")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("shared", "tui"))}

    def distmon(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "distmon", "--once", "--no-gpu", *args,
                               str(logdir)], capture_output=True, text=True, env=env,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    doc = json.loads(distmon("--json"))
    [alert] = [a for a in doc["alerts"] if a["kind"] == "loss_spike"]
    assert alert["severity"] == "warning" and alert["run"] == "late/train"
    assert "loss 12.3 at step 150" in alert["message"] and "recovered by itself" in \
        alert["message"]
    [run] = doc["runs"]
    loss = run["scalars"]["loss"]
    assert loss["spike_count"] == 1 and loss["count"] == steps
    assert [(s["step"], s["value"], s["back_step"]) for s in loss["spikes"]] == [
        (150, pytest.approx(12.3), 153)]  # a float32 in the file
    text = distmon()
    assert "loss spike: loss 12.3 at step 150" in text and "recovered by itself" in text


def test_a_live_runs_spike_is_remembered_as_it_moves_on(tmp_path: Path) -> None:
    """The store reads the run as it is written: the spike at step 150 (read with the point
    after it) is still told when the writer is at step 300, far past any window."""
    from tensorboardX import SummaryWriter

    from distcore.events.store import RunStore
    from distcore.events.watch import LogdirWatcher
    from tests.core.events_helpers import only_run

    values, store = spike_at_150(300), RunStore()
    watcher = LogdirWatcher([tmp_path], store, poll=True)
    # Two sessions of the writer (a job resumed), each file closed before it is read.
    for suffix, steps in ((".a", range(152)), (".b", range(152, 300))):
        with SummaryWriter(str(tmp_path / "live"), filename_suffix=suffix) as writer:
            for step in steps:
                writer.add_scalar("loss", values[step], step)
        watcher.scan_once()
        assert loss_spike(only_run(tmp_path, store)) is not None
    run = only_run(tmp_path, store)
    assert run.scalars["loss"].last_step == 299
    found = loss_spike(run)
    assert found is not None and found.severity == "warning"
    assert "at step 150" in found.message and "recovered by itself" in found.message
    assert found == oracle.loss_spike(run)  # every point kept: the plain rule over them agrees


def test_the_spikes_a_loss_had_are_counted_in_the_metrics(tmp_path: Path) -> None:
    """`distmon_loss_spikes` counts every spike read, the recovered ones too."""
    from distcore.events.once import load_once
    from distcore.jobs.index import JobIndex
    from tests.core.test_metrics import exposition, named, samples

    values = spike_at_150(300)
    values[60] = 40.0
    write_job(tmp_path, "late", values, "finished")
    snap = JobIndex(fixed.FixedRuns(list(load_once([tmp_path]))), clock=time.time).refresh()
    assert snap is not None
    found = named(samples(exposition(snap)), "distmon_loss_spikes")
    assert [(s[1], s[2]) for s in found] == [
        ({"job": "late", "run": "late/train", "tag": "loss"}, 2.0)]


async def test_the_dashboard_warns_of_a_finished_runs_recovered_spike(tmp_path: Path) -> None:
    """The real watcher and index under the dashboard: the alerts panel warns of the spike at
    step 150 of a finished 300-step run."""
    from distmon.widgets.panels import Panel
    from tests.kit.wait import until
    from tests.tui.test_live import app_over

    write_job(tmp_path, "late", spike_at_150(300), "finished")
    app = app_over(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        alerts = app.query_one("#alerts", Panel)
        await until(pilot, lambda: "at step 150" in str(alerts.render()), "the spike's alert")
        shown = str(alerts.render())
        assert shown.startswith("▲ late/train: loss spike: loss 12.3 at step 150"), shown
        assert "recovered by itself" in shown
