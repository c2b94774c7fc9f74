"""Histograms after a writer goes back to an earlier step: the restart rule of the scalars and
of TensorBoard's data server (its reservoir preempts histograms as it preempts scalars), checked
against the Rust data server on files from a real writer (tensorboardX), and against
EventAccumulator where a tf1 session restart record purges the whole run (distmon's rule for
scalars and histograms alike; the data server ignores those records)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from distcore.events import load_once
from distcore.histograms.records import HistogramPoint
from distcore.histograms.store import HistogramStore
from tests.core.data_server import data_server
from tests.core.test_histograms import tb_bands

Steps = list[int]


def _write(run: Path, steps: Steps, tags: tuple[str, ...] = ("w",), restart: int | None = None,
           after: Sequence[int] = (), suffix: str = "") -> None:
    """tensorboardX's SummaryWriter: `steps`, then (optionally) a session restart record at
    `restart`, then `after` (tag "w" only) in the same file. Its file names end in the second
    and the host: `suffix` keeps a second file of the same second apart and sorted after."""
    from tensorboardX import SummaryWriter
    from tensorboardX.proto import event_pb2

    with SummaryWriter(str(run), filename_suffix=suffix) as writer:
        for step in steps:
            for i, tag in enumerate(tags):
                writer.add_histogram(tag, np.arange(20.0) * (step + 1) + i, step)
        if restart is not None:
            log = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
            writer._get_file_writer().add_event(
                event_pb2.Event(step=restart, wall_time=2e9, session_log=log))
        for step in after:
            writer.add_histogram("w", np.arange(20.0) * -(step + 1), step)


def _ours(logdir: Path) -> dict[str, dict[str, list[tuple[int, float, list[float]]]]]:
    return {
        run.name: {tag: [(p.step, p.wall_time, list(p.bands)) for p in s.points]
                   for tag, s in run.histograms.items()}
        for run in load_once([logdir])
    }


def _rust(logdir: Path) -> dict[str, dict[str, list[tuple[int, float, list[float]]]]]:
    from tensorboard import context
    from tensorboard.plugins.distribution import compressor

    with data_server(logdir, "histograms") as provider:
        data = provider.read_tensors(context.RequestContext(), experiment_id="",
                                     plugin_name="histograms", downsample=10**9)
    return {
        run: {tag: [(d.step, d.wall_time, [v for _, v in compressor.compress_histogram(d.numpy)])
                    for d in points] for tag, points in tags.items()}
        for run, tags in data.items()
    }


def _assert_equal(mine: list[tuple[int, float, list[float]]],
                  theirs: list[tuple[int, float, list[float]]]) -> None:
    assert [(s, w) for s, w, _ in mine] == [(s, w) for s, w, _ in theirs]
    for (_, _, a), (_, _, b) in zip(mine, theirs, strict=True):
        assert np.allclose(a, b, rtol=1e-12, atol=1e-9)


def test_rolled_back_histograms_equal_tensorboards_data_server(tmp_path: Path) -> None:
    _write(tmp_path / "same_file", [0, 1, 2, 3, 4, 5, 3, 4], tags=("w", "b"))
    _write(tmp_path / "new_file", [0, 1, 2, 3, 4, 5], suffix=".1")
    _write(tmp_path / "new_file", [2, 3], suffix=".2")  # the resumed job's own file
    _write(tmp_path / "repeats", [0, 1, 1, 1, 2, 2])
    ours, theirs = _ours(tmp_path), _rust(tmp_path)
    assert sorted(ours) == sorted(theirs) == ["new_file", "repeats", "same_file"]
    for run, tags in theirs.items():
        assert sorted(ours[run]) == sorted(tags), run
        for tag, points in tags.items():
            _assert_equal(ours[run][tag], points)
    assert [p[0] for p in ours["same_file"]["w"]] == [0, 1, 2, 3, 4]
    assert [p[0] for p in ours["new_file"]["w"]] == [0, 1, 2, 3]
    assert [p[0] for p in ours["repeats"]["w"]] == [0, 1, 2]


def test_a_session_restart_purges_every_histogram_tag_as_event_accumulator_does(
    tmp_path: Path,
) -> None:
    # Restart and histograms in one read: those before the record at steps >= 3 go, "b" too
    # (not written again); "w" is written again from step 3 on.
    _write(tmp_path, [0, 1, 2, 3, 4, 5], tags=("w", "b"), restart=3, after=[3, 4])
    (run,) = load_once([tmp_path])
    assert [p.step for p in run.histograms["w"].points] == [0, 1, 2, 3, 4]
    assert [p.step for p in run.histograms["b"].points] == [0, 1, 2]
    assert run.histograms["b"].count == 3 and run.histograms["w"].count == 5
    theirs = tb_bands(tmp_path)  # EventAccumulator, purge_orphaned_data on (its default)
    for tag, series in run.histograms.items():
        assert [p.step for p in series.points] == sorted(theirs[tag]), tag
        for point in series.points:
            assert np.allclose(point.bands, theirs[tag][point.step], atol=1e-9), (tag, point)
    # The data server keeps "b" whole (it ignores session records) but preempts "w" alike.
    rust = _rust(tmp_path)[run.name]
    _assert_equal([(p.step, p.wall_time, list(p.bands)) for p in run.histograms["w"].points],
                  rust["w"])


def _point(step: int) -> HistogramPoint:
    return HistogramPoint(step=step, wall_time=float(step), num=1.0, bands=(float(step),) * 9)


@pytest.mark.parametrize(
    ("steps", "max_points", "kept", "count"),
    [
        ([0, 1, 2, 3], 100, [0, 1, 2, 3], 4),
        ([0, 1, 2, 3, 2, 3], 100, [0, 1, 2, 3], 4),  # back to 2: the old 2 and 3 replaced
        ([0, 1, 2, 2, 2], 100, [0, 1, 2], 3),  # a repeated step keeps the newest
        ([5, 6, 7, 0], 100, [0], 1),  # below everything kept
        ([0, 1, 2, 3, 4, 5, 6, 7], 4, [0, 5, 6, 7], 8),  # thinned: every point still counted
        ([0, 1, 2, 3, 4, 5, 6, 7, 3], 4, [0, 3], 4),  # thinned, then back into the thinned part
        ([0, 1, 2, 3, 4, 5, 6, 7, 6], 4, [0, 5, 6], 7),
    ],
)
def test_store_restart_rule(steps: Steps, max_points: int, kept: Steps, count: int) -> None:
    store = HistogramStore(max_points)
    store.add(("t", _point(s)) for s in steps)
    series = store.snapshot()["t"]
    assert [p.step for p in series.points] == kept and series.count == count
    assert series.points[-1] == _point(steps[-1])  # the newest point always stays
