"""The profile as text and as the details panel's bar: durations, the step split, the stages and
ops, an unreadable profile as one line; hostile names escaped."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from distcore.profile import OpTime, ProfileError, Stage, StepTime
from distmon.render.profile import (
    bar_segments,
    bar_text,
    breakdown_line,
    milliseconds,
    op_lines,
    profile_lines,
    stage_lines,
)
from distmon.widgets.panels import profile_texts
from tests.core.test_profile_jobs import summary


@pytest.mark.parametrize(
    ("ms", "shown"),
    [(0.0, "0.00 ms"), (0.421, "0.42 ms"), (62.34, "62.3 ms"), (1250.0, "1.25 s"),
     (9.2e15, "9.2e+12 s"), (float("nan"), "–"), (float("inf"), "–"), (-1.0, "–")],
)
def test_milliseconds(ms: float, shown: str) -> None:
    assert milliseconds(ms) == shown


@pytest.mark.parametrize("width", [0, 1, 7, 40, 123])
@pytest.mark.parametrize("input_percent", [0.0, 3.0, 50.0, 99.9, 100.0])
def test_the_bar_fills_its_width_in_parts_order(width: int, input_percent: float) -> None:
    profile = summary(input_percent)
    profile = dataclasses.replace(profile, total=dataclasses.replace(
        profile.total, device_compute_ms=profile.total.step_ms - profile.total.input_ms))
    segments = bar_segments(profile, width)
    assert sum(cells for _, cells in segments) == width
    assert [part for part, _ in segments] == [p for p in ("input", "device compute")
                                               if any(q == p for q, _ in segments)]
    assert len(bar_text(segments)) == width


def test_a_profile_without_steps_has_no_bar_and_says_so() -> None:
    profile = summary(50.0, steps=0)
    assert bar_segments(profile, 40) == []
    assert breakdown_line(profile) == "no steps found in 10 events"


def test_the_step_line_is_the_mean_step() -> None:
    line = breakdown_line(dataclasses.replace(summary(25.0), input_verdict="highly input-bound"))
    assert line == ("step 100.0 ms: input 25.0 ms (25%), device compute 0.00 ms (0%), "
                    "host compute 0.00 ms (0%), communication 0.00 ms (0%), "
                    "other 0.00 ms (0%) (4 steps, highly input-bound)")


def test_stages_ops_and_an_unreadable_profile() -> None:
    stage = Stage("Iterator::Root::ParallelMapV2", 12.5, 0.25,
                  {"parallelism": 8, "autotune": "true"})
    op = OpTime("MatMul\x1b[2J", "host", "compute", 3, 0.5)
    profile = dataclasses.replace(summary(50.0), stages=(stage,), top_ops=(op,))
    (shown,) = stage_lines(profile)
    assert "12.5 ms" in shown and "25%" in shown and "parallelism 8 autotuned" in shown
    assert shown.endswith("ParallelMapV2 (Iterator::Root::ParallelMapV2)")
    (line,) = op_lines(profile)
    assert "×3" in line and line.endswith("MatMul\\x1b[2J")
    error = ProfileError("/l/j/x.xplane.pb\x1b]0;t\x07", "not an XSpace protobuf")
    assert profile_lines(error) == [
        "profile: profile unreadable: not an XSpace protobuf (/l/j/x.xplane.pb\\x1b]0;t\\x07)"]
    (text,) = profile_texts(error)
    assert text.plain == profile_lines(error)[0] and str(text.style) == "red"


def test_the_panel_starts_with_the_bar_and_the_bottleneck() -> None:
    texts = profile_texts(dataclasses.replace(summary(75.0), input_verdict="highly input-bound"),
                          width=20)
    assert texts[0].plain == "profile " + "▓" * 20 + " 100.0 ms a step, 75% input (highly " \
        "input-bound)"  # input alone: the rest of the step is 0 ms
    assert texts[1].plain.startswith("bottleneck: MapAndBatch (Iterator::Root::MapAndBatch): ")
    assert texts[2].plain.startswith("step 100.0 ms: input 75.0 ms (75%)")
    assert texts[-1].plain == "from /logs/j/train/plugins/profile/t/h.xplane.pb"
    no_steps = profile_texts(summary(75.0, steps=0))
    assert no_steps[0].plain == "profile no steps found in 10 events"


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=6, max_size=6),
       st.integers(min_value=0, max_value=(1 << 53) - 1), st.integers(min_value=0, max_value=200))
@example([math.inf, 1.0, math.nan, -1.0, 1e308, 50.0], 4, 40)
@example([1.0, 1e308, 1e308, math.inf, 0.0, 50.0], 1, 40)
def test_any_figures_render_without_raising(
    figures: list[float], steps: int, width: int
) -> None:
    """A summary comes from a subprocess's JSON: the renderer takes whatever numbers it holds."""
    profile = dataclasses.replace(
        summary(figures[5] if figures[5] == figures[5] else 0.0, steps=steps),
        total=StepTime(steps, figures[0], figures[1], figures[2], figures[3], figures[4], 0.0))
    segments = bar_segments(profile, width)
    assert sum(cells for _, cells in segments) in (0, width)
    for line in (breakdown_line(profile), *profile_lines(profile)):
        assert "\x1b" not in line and "\n" not in line
