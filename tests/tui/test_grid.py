"""The chart grid screen (`v`): a Keras fit's train and validation runs, per-step and per-epoch
series, at three terminal sizes, in colour and without; its cursor read off the screen."""

from __future__ import annotations

from typing import Any

import pytest
from rich.text import Text

from distcore.smoothing import debiased_ema
from distmon.formats import number
from distmon.render.grid_model import HUES
from distmon.render.grid_state import FOOTER
from distmon.widgets.grid import ChartGridScreen, GridView
from tests.kit.wait import until
from tests.tui.conftest import MakeApp, ready
from tests.tui.fixed import falling, rising, run, series

EPOCHS = 5
BATCHES = 60  # steps of the batch series, 12 an epoch


def fit_runs() -> list[Any]:
    """As Keras' TensorBoard callback writes them: batch series at steps, epoch series at
    x = epoch, validation at epochs only; a train-only `learning_rate` group of two tags."""
    train = run(
        "fit/train",
        series("batch_loss", [0.25 * (BATCHES - i) for i in range(BATCHES)], step_every=1),
        series("epoch_loss", falling(EPOCHS), step_every=1),
        series("epoch_accuracy", rising(EPOCHS), step_every=1),
        series("optimizer/learning_rate", [0.01] * BATCHES, step_every=1),
        series("optimizer/momentum", [0.9] * BATCHES, step_every=1),
    )
    validation = run(
        "fit/validation",
        series("epoch_loss", falling(EPOCHS, 2.4, 0.3), step_every=1),
        series("epoch_accuracy", rising(EPOCHS, 0.1, 0.9), step_every=1),
    )
    return [train, validation]


async def open_grid(pilot: Any) -> GridView:
    await ready(pilot)
    await pilot.press("v")
    await until(pilot, lambda: isinstance(pilot.app.screen, ChartGridScreen), "the grid", 20,
                every=0.02)
    await pilot.pause()
    view: GridView = pilot.app.screen.query_one(GridView)
    return view


def page(view: GridView) -> Text:
    return view.render()


@pytest.mark.parametrize(("size", "charts"), [((80, 24), 1), ((160, 48), 5), ((240, 60), 5)])
async def test_the_grid_fits_the_terminal(make_app: MakeApp, size: tuple[int, int],
                                          charts: int) -> None:
    app = make_app(fit_runs())
    async with app.run_test(size=size) as pilot:
        view = await open_grid(pilot)
        text = page(view)
        lines = text.plain.split("\n")
        assert lines[0].startswith("charts of fit · 5 tags")
        shown = [t for line in lines for t in line.split("   ") if " · " in t
                 and not t.startswith("charts of")]
        assert len(shown) == charts
        # Grouped as TensorBoard groups them: the two optimizer/ tags side by side, last.
        names = sorted(text.plain.split("optimizer/")[1:])
        assert len(names) == (2 if charts > 1 else 0)
        assert len(lines) == size[1] - 1  # the key bar below
        legend = lines[-FOOTER]
        assert "fit/train" in legend and "fit/validation" in legend


async def test_epoch_series_have_their_own_axis_in_epochs(make_app: MakeApp) -> None:
    app = make_app(fit_runs())
    async with app.run_test(size=(160, 48)) as pilot:
        text = page(await open_grid(pilot)).plain
        assert "batch_loss · step" in text and "epoch_loss · epoch" in text
        axes = [line.split() for line in text.splitlines() if line.strip().startswith("0 ")]
        assert ["0", str(BATCHES - 1), "0", str(EPOCHS - 1), "0", str(EPOCHS - 1)] in axes


async def test_each_run_keeps_its_colour_validation_a_lighter_tone(make_app: MakeApp) -> None:
    app = make_app(fit_runs())
    async with app.run_test(size=(160, 48)) as pilot:
        view = await open_grid(pilot)
        colours = {str(span.style.color.triplet.hex) for span in page(view).spans  # type: ignore
                   if not isinstance(span.style, str) and span.style.color is not None}
        strong, light = HUES[0]
        assert colours == {strong, light}
        await pilot.press("pagedown", "pageup", "down")  # another chart focused: the same
        assert {str(s.style.color.triplet.hex) for s in page(view).spans  # type: ignore
                if not isinstance(s.style, str) and s.style.color is not None} == colours


async def test_without_colour_line_styles_and_a_legend_in_words(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(fit_runs())
    async with app.run_test(size=(160, 48)) as pilot:
        text = page(await open_grid(pilot))
        legend = text.plain.split("\n")[-FOOTER]
        assert "━━━━ fit/train (solid)" in legend and "━━━  fit/validation (dashed)" in legend
        assert all(s.style.color is None for s in text.spans if not isinstance(s.style, str))


async def test_the_cursor_reads_step_raw_and_smoothed_values(make_app: MakeApp) -> None:
    app = make_app(fit_runs())
    async with app.run_test(size=(160, 48)) as pilot:
        view = await open_grid(pilot)  # batch_loss first, focused
        await pilot.press("right")  # the cursor starts at the newest point
        await pilot.press("left", "left", "left")
        at = BATCHES - 4
        raw = [0.25 * (BATCHES - i) for i in range(BATCHES)]
        smoothed = debiased_ema(raw, 0.6)[at]
        line = page(view).plain.split("\n")[-FOOTER + 1]
        assert line.startswith(f"fit/train  step {at}  value {number(raw[at], 6)}  "
                               f"smoothed {number(smoothed, 6)}  ")
        assert raw[at] == 1.0


async def test_filter_maximise_zoom_and_back(make_app: MakeApp) -> None:
    app = make_app(fit_runs())
    async with app.run_test(size=(160, 48)) as pilot:
        view = await open_grid(pilot)
        await pilot.press("slash", *"^epoch", "enter")
        assert "2 tags" in page(view).plain.split("\n")[0]
        await pilot.press("enter")  # maximised: one chart
        assert "page 1/2" in page(view).plain.split("\n")[0]
        await pilot.press("right", "left_square_bracket")
        assert "zoom " in page(view).plain.split("\n")[0]
        await pilot.press("right_square_bracket")
        assert "zoom " not in page(view).plain.split("\n")[0]
        await pilot.press("v")
        assert not isinstance(app.screen, ChartGridScreen)


@pytest.mark.parametrize("size", [(80, 24), (160, 48), (240, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_grid_snapshots(snap_compare: Any, make_app: MakeApp, size: tuple[int, int]) -> None:
    async def opened(pilot: Any) -> None:
        await open_grid(pilot)

    assert snap_compare(make_app(fit_runs()), terminal_size=size, run_before=opened)


def test_grid_snapshot_without_colour(snap_compare: Any, make_app: MakeApp,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")

    async def opened(pilot: Any) -> None:
        await open_grid(pilot)

    assert snap_compare(make_app(fit_runs()), terminal_size=(160, 48), run_before=opened)
