"""Every file of ../shared/wild read by distcore, against what TensorBoard shows.

Two references, both TensorBoard's own code on the same files:
- the Rust data server (`tensorboard --load_fast`, TensorBoard's default loader when the
  `tensorboard-data-server` package is installed), asked over its gRPC data-provider API with
  every point kept: it must equal ours exactly, point for point, wall times included (the
  histograms too: steps and wall times exactly, distribution bands to rounding; rollbacks from
  real writers are tests/core/test_histograms_rollback.py);
- the Python EventAccumulator (TensorBoard's loader without the data server). It keeps points
  whose step repeats or goes back, where the data server (and distcore) apply the restart rule
  "a point at step s drops the tag's kept points at steps >= s". That is the one deliberate
  difference: EventAccumulator's points with that rule applied must equal ours. The runs where
  it matters are listed in EVENT_ACCUMULATOR_KEEPS_RESTARTED_POINTS, so a new difference fails.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distcore.events import load_once
from tests.core.data_server import data_server
from tests.core.events_helpers import WILD, require_wild

Points = list[tuple[int, float, float]]
Bands = list[tuple[int, float, list[float]]]



@pytest.fixture(autouse=True)
def _wild() -> None:
    require_wild()

# Runs where EventAccumulator shows points the restart rule drops (steps repeated or going back
# within a file, or a second file of the run starting again from step 0).
EVENT_ACCUMULATOR_KEEPS_RESTARTED_POINTS = {
    "determined-ai__determined/harness/tests/experiment/pytorch/runs/Apr14_21-11-43_dbb671e12fce",
    "janosh__tensorboard-reducer/tests/runs/duplicate_steps/run_1",
    "tensorflow__agents/tf_agents/benchmark/test_data/event_log_too_many",
    "tensorflow__agents/tools/test_data/event_log_ant_eval02",
    "tensorflow__tensorboard/tensorboard/plugins/profile",
}


def _ours() -> dict[str, dict[str, Points]]:
    runs = load_once([WILD], max_points=10**7)  # keep every point
    return {
        run.name: {
            tag: list(zip(s.steps, s.values, s.wall_times, strict=True))
            for tag, s in run.scalars.items()
        }
        for run in runs
    }


def _same(a: Points, b: Points) -> bool:
    return len(a) == len(b) and all(
        x[0] == y[0] and x[2] == y[2] and (x[1] == y[1] or (math.isnan(x[1]) and math.isnan(y[1])))
        for x, y in zip(a, b, strict=True)
    )


@functools.cache  # asked once for both decoder paths
def _rust_data_server() -> tuple[dict[str, dict[str, Points]], dict[str, dict[str, Bands]]]:
    from tensorboard import context
    from tensorboard.plugins.distribution import compressor

    with data_server(WILD, "scalars", "histograms") as provider:
        ctx = context.RequestContext()
        data = provider.read_scalars(ctx, experiment_id="", plugin_name="scalars",
                                     downsample=10**9)
        histograms = provider.read_tensors(ctx, experiment_id="", plugin_name="histograms",
                                           downsample=10**9)
    scalars = {
        run: {tag: [(p.step, p.value, p.wall_time) for p in points] for tag, points in tags.items()}
        for run, tags in data.items()
    }
    bands = {
        run: {tag: [(d.step, d.wall_time, [v for _, v in compressor.compress_histogram(d.numpy)])
                    for d in points] for tag, points in tags.items()}
        for run, tags in histograms.items()
    }
    return scalars, bands


def test_wild_scalars_equal_tensorboards_data_server(decoder_path: str) -> None:
    ours, theirs = _ours(), _rust_data_server()[0]
    assert sorted(ours) == sorted(theirs)
    for run, tags in theirs.items():
        assert sorted(ours[run]) == sorted(tags), run
        for tag, points in tags.items():
            assert _same(ours[run][tag], points), (run, tag)


def test_wild_histograms_equal_tensorboards_data_server() -> None:
    """Steps and wall times exactly (the restart rule included), bands to rounding."""
    runs = load_once([WILD], max_points=10**7)
    ours = {run.name: {tag: [(p.step, p.wall_time, list(p.bands)) for p in s.points]
                       for tag, s in run.histograms.items()} for run in runs if run.histograms}
    theirs = {run: tags for run, tags in _rust_data_server()[1].items() if tags}
    assert sorted(ours) == sorted(theirs)
    for run, tags in theirs.items():
        assert sorted(ours[run]) == sorted(tags), run
        for tag, points in tags.items():
            mine = ours[run][tag]
            assert [p[:2] for p in mine] == [p[:2] for p in points], (run, tag)
            for a, b in zip(mine, points, strict=True):
                assert np.allclose(a[2], b[2], rtol=1e-12, atol=1e-9, equal_nan=True), (run, tag)


def _event_accumulator(run_dir: Path) -> dict[str, Points]:
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    acc = ea.EventAccumulator(str(run_dir), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    acc.Reload()
    out: dict[str, Points] = {}
    tags: dict[str, Any] = acc.Tags()
    for tag in tags["scalars"]:
        out[tag] = [(e.step, e.value, e.wall_time) for e in acc.Scalars(tag)]
    for tag in tags["tensors"]:
        meta = acc.summary_metadata.get(tag)
        if meta is not None and meta.plugin_data.plugin_name == "scalars":
            out[tag] = [
                (e.step, float(tensor_util.make_ndarray(e.tensor_proto).item()), e.wall_time)
                for e in acc.Tensors(tag)
            ]
    return out


def _restart_rule(points: Points) -> Points:
    kept: Points = []
    for point in points:
        while kept and kept[-1][0] >= point[0]:
            kept.pop()
        kept.append(point)
    return kept


def test_wild_scalars_equal_event_accumulator_but_for_the_restart_rule() -> None:
    ours = _ours()
    differs = set()
    for run, tags in ours.items():
        theirs = _event_accumulator(WILD / run)
        assert sorted(tags) == sorted(theirs), run
        for tag, points in theirs.items():
            assert _same(tags[tag], _restart_rule(points)), (run, tag)
            if not _same(tags[tag], points):
                differs.add(run)
    assert differs == EVENT_ACCUMULATOR_KEEPS_RESTARTED_POINTS
