"""The ledger as the dashboard and `--once` draw it: a bar whose cells follow the buckets'
shares, the buckets in words, `–` for what nobody measured."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distcore.jobs.ledger import BUCKETS, Ledger
from distmon.render.ledger import bar_segments, bar_text, duration, ledger_line
from distmon.widgets.panels import ledger_lines


def agent_ledger(**seconds: float) -> Ledger:
    buckets = {b: seconds.get(b, 0.0) for b in BUCKETS}
    return Ledger("agent", buckets, sum(buckets.values()))


@pytest.mark.parametrize(("seconds", "width", "segments"), [
    ({"compute": 75.0, "startup": 25.0}, 40, [("startup", 10), ("compute", 30)]),
    ({"compute": 1.0, "lost": 1.0, "unknown": 1.0}, 10,
     [("compute", 4), ("lost", 3), ("unknown", 3)]),  # the leftover cell: the first tie
    ({"compute": 999.0, "unknown": 1.0}, 40, [("compute", 40)]),  # under half a cell: none
    ({}, 40, []),
])
def test_the_bar_follows_the_shares(seconds: dict[str, float], width: int,
                                    segments: list[tuple[str, int]]) -> None:
    assert bar_segments(agent_ledger(**seconds), width) == segments


@given(st.dictionaries(st.sampled_from(BUCKETS), st.floats(0, 1e9), min_size=1),
       st.integers(1, 200))
def test_the_bar_is_always_its_width(seconds: dict[str, float], width: int) -> None:
    segments = bar_segments(agent_ledger(**seconds), width)
    if sum(seconds.values()) > 0:
        assert sum(n for _, n in segments) == width == len(bar_text(segments))


def test_the_words_name_every_bucket_that_took_time() -> None:
    line = ledger_line(agent_ledger(compute=60.0, startup=30.0, lost=10.0))
    assert line.startswith("wall 1m 40s, goodput 60%: startup 30.0 s (30%), compute 1m 00s")
    assert "lost 10.0 s (10%)" in line and "recovery" not in line
    assert line.endswith("[run.json]")


def test_what_nobody_measured_reads_a_dash() -> None:
    events = Ledger("events", dict.fromkeys(BUCKETS), 4000.0, gaps=2, gap_seconds=600.0)
    assert ledger_line(events) == ("wall 1h 06m, goodput –: 2 gaps between points (10m 00s); "
                                   "every bucket –  [events only]")
    partial = Ledger("scalars", {**dict.fromkeys(BUCKETS), "compute": 5.0}, None)
    assert "wall –, goodput –" in ledger_line(partial)
    assert "lost –" in ledger_line(partial)
    assert [t.plain for t in ledger_lines(events)] == [f"time {ledger_line(events)}"]


@pytest.mark.parametrize(("seconds", "text"), [
    (None, "–"), (-1.0, "–"), (float("nan"), "–"), (0.04, "0.0 s"), (59.94, "59.9 s"),
    (61.0, "1m 01s"), (3600.0, "1h 00m"), (90061.0, "25h 01m"),
])
def test_duration(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text
