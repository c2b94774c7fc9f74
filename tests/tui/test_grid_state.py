"""The chart grid's pure parts as tables: its shape per terminal size, its key transitions,
TensorBoard's tag groups and filter, the outlier range, and each run's look."""

from __future__ import annotations

import pytest

from distcore.jobs.snapshots import Job
from distmon.render import grid_state as grids
from distmon.render.grid import Shown, chart_lines, y_range
from distmon.render.grid_model import HUES, GridChart, GridMemory, Trace, grid_tags, per_epoch
from distmon.render.grid_state import GridState
from tests.tui.fixed import run, series


@pytest.mark.parametrize(("size", "shape"), [
    ((80, 23), (1, 1)), ((160, 47), (3, 3)), ((240, 59), (4, 4)), ((40, 10), (1, 1)),
])
def test_the_grid_fits_the_size(size: tuple[int, int], shape: tuple[int, int]) -> None:
    assert grids.grid_shape(*size) == shape


XS = [0.0, 10.0, 20.0, 30.0, 40.0]


@pytest.mark.parametrize(("state", "delta", "cursor"), [
    (GridState(), 1, 40.0),  # the cursor starts at the newest point
    (GridState(), -1, 40.0),
    (GridState(cursor=40.0), -1, 30.0),
    (GridState(cursor=0.0), -1, 0.0),  # clamped
    (GridState(cursor=40.0), 1, 40.0),
    (GridState(cursor=15.0), 1, 30.0),  # from between two points: the next after
])
def test_the_cursor_moves_among_the_points(state: GridState, delta: int, cursor: float) -> None:
    assert grids.moved_cursor(state, XS, delta).cursor == cursor


def test_zoom_halves_the_range_around_the_cursor_and_back() -> None:
    state = grids.zoomed_in(GridState(cursor=40.0), XS)
    assert state.zooms == ((20.0, 40.0),)
    assert grids.zoomed_out(state).zooms == ()
    assert grids.zoomed_in(GridState(), XS[:2]) == GridState()  # too few points


@pytest.mark.parametrize(("focus", "delta", "total", "size", "after"), [
    (0, 1, 20, 9, 9), (9, 1, 20, 9, 18), (18, 1, 20, 9, 18), (12, -1, 20, 9, 0),
])
def test_paging_focuses_a_page_first_chart(focus: int, delta: int, total: int, size: int,
                                           after: int) -> None:
    assert grids.paged(GridState(focus=focus), delta, total, size).focus == after


def test_another_chart_starts_without_cursor_or_zoom() -> None:
    state = GridState(cursor=3.0, zooms=((0.0, 5.0),))
    assert grids.focused(state, 1, 4) == GridState(focus=1)
    assert grids.focused(GridState(focus=3), 1, 4) == GridState(focus=3)


@pytest.mark.parametrize(("tag", "group", "epoch"), [
    ("epoch_loss", "epoch_loss", True), ("batch_loss", "batch_loss", False),
    ("optimizer/learning_rate", "optimizer", False), ("fit/epoch_accuracy", "fit", True),
])
def test_groups_and_epoch_series(tag: str, group: str, epoch: bool) -> None:
    from distmon.render.grid_model import group_of

    assert (group_of(tag), per_epoch(tag)) == (group, epoch)


def job(*tags: str) -> Job:
    train = run("j/train", *(series(t, [1.0, 2.0]) for t in tags))
    validation = run("j/validation", series("epoch_loss", [2.0, 3.0]))
    return Job("j", None, {"train": train, "validation": validation}, "live", None, (), ())


@pytest.mark.parametrize(("pattern", "tags"), [
    ("", ["b/x", "b/y", "epoch_loss", "z"]),
    ("^b/", ["b/x", "b/y"]),
    ("LOSS", ["epoch_loss"]),  # case-insensitive
    ("(", []),  # half-typed: literally
])
def test_tags_grouped_and_filtered(pattern: str, tags: list[str]) -> None:
    assert list(grid_tags([job("z", "b/y", "b/x", "epoch_loss")], pattern)) == tags


def test_a_run_keeps_its_look_and_validation_is_its_hue_light_tone() -> None:
    memory = GridMemory()
    first = memory.looks([("a", "train", "a/train"), ("a", "validation", "a/validation")])
    assert first == {"a/train": (HUES[0][0], 0), "a/validation": (HUES[0][1], 1)}
    again = memory.looks([("b", "train", "b/train"), ("a", "validation", "a/validation")])
    assert again["a/validation"] == first["a/validation"] and again["b/train"][0] == HUES[1][0]


def test_outliers_are_left_out_of_the_y_range() -> None:
    values = [1.0] * 50 + [1000.0] + [2.0] * 49
    trace = Trace("r", list(range(100)), values, values, [0.0] * 100, "#ffffff", 0, False)
    low, high = y_range([trace]) or (0.0, 0.0)
    assert low < 1.0 and 2.0 < high < 10.0
    chart = GridChart("t", "step", (trace,))
    lines = chart_lines(chart, 60, 12, Shown(ignore_outliers=True))
    assert "1e3" not in "".join(line.plain for line in lines)  # the spike is cut, not scaled to
