"""A histogram tag on the second chart: picked with `t`, drawn as TensorBoard's nine
distribution bands over the steps (the median bright, the others dimmed)."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from distcore.events.snapshots import RunSnapshot
from distcore.histograms.records import HistogramPoint, HistogramSeries
from distmon.render.distribution import HISTOGRAM_PREFIX, band_curves
from distmon.render.view_model import all_tags
from distmon.widgets.charts import LineChart
from tests.kit.wait import until
from tests.tui.conftest import MakeApp, choose, ready
from tests.tui.fixed import keras_job

TAG = "weights/dense/kernel"


def with_histogram(run: RunSnapshot) -> RunSnapshot:
    points = tuple(HistogramPoint(step, 1000.0 + step, 100.0,
                                  tuple(float(step + band) for band in range(9)))
                   for step in (10, 20, 30))
    series = HistogramSeries(TAG, points, count=3)
    return dataclasses.replace(run, histograms=MappingProxyType({TAG: series}))


def runs() -> list[RunSnapshot]:
    return [with_histogram(r) if r.name.endswith("/train") else r for r in keras_job("job")]


async def test_t_shows_a_histogram_tag_as_distribution_bands(make_app: MakeApp) -> None:
    app = make_app(runs())
    async with app.run_test() as pilot:
        await ready(pilot)
        wanted = HISTOGRAM_PREFIX + TAG
        await choose(pilot, app, "t", f"tag: {wanted}")
        assert app.dashboard.tag_choices()[-1].name == f"tag: {wanted}"  # after the scalar tags
        chart = app.query_one("#chart-second", LineChart)
        await until(pilot, lambda: app.dashboard.state.second_tag == wanted, "the histogram's tag")
        await until(pilot, lambda: len(chart._curves) == 9, "the bands")
        assert [c.dim for c in chart._curves] == [True] * 4 + [False] + [True] * 4
        assert chart._curves[4].xs == (10.0, 20.0, 30.0) and chart._curves[4].ys == (14.0, 24.0,
                                                                                     34.0)
        assert str(chart.border_title).startswith(wanted)


def test_band_curves_follow_the_x_mode_and_skip_runs_without_the_tag() -> None:
    from distcore.jobs.snapshots import Job

    run = with_histogram(keras_job("job")[0])
    job = Job(name="job", directory=None, parts={"train": run, "validation": keras_job("job")[1]},
              status="live", agent=None, hosts=(), alerts=())
    relative = band_curves([job], HISTOGRAM_PREFIX + TAG, "relative")
    assert len(relative) == 9 and relative[0].xs == (0.0, 10.0, 20.0)
    assert band_curves([job], HISTOGRAM_PREFIX + "missing", "step") == ()
    assert HISTOGRAM_PREFIX + TAG in all_tags([job])
