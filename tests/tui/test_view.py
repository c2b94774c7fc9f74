"""The dashboard's view state: each key's transition and what the view shows, as tables."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from distcore.jobs.snapshots import Job, JobsSnapshot
from distcore.location import RunLocation
from distcore.producer import ProducerError
from distmon import view as views
from distmon.render.compare_view import TableView
from distmon.view import ViewState

BASE = ViewState(note="")


@pytest.mark.parametrize(
    ("before", "step", "after"),
    [
        (BASE, lambda v: views.toggle_selected(v, "a"), BASE.replace(selected=frozenset("a"))),
        (BASE.replace(selected=frozenset("ab")), lambda v: views.toggle_selected(v, "a"),
         BASE.replace(selected=frozenset("b"))),
        (BASE, lambda v: views.toggle_focus(v, "a"), BASE.replace(focused_job="a")),
        (BASE.replace(focused_job="a"), lambda v: views.toggle_focus(v, "a"), BASE),
        (BASE.replace(focused_job="a"), lambda v: views.toggle_focus(v, "b"),
         BASE.replace(focused_job="b")),
        (BASE, lambda v: views.with_cursor(v, "c"), BASE.replace(cursor_job="c")),
        (BASE, lambda v: views.with_pattern(v, "^q"), BASE.replace(pattern="^q")),
        (BASE, lambda v: views.with_second_tag(v, "perf/x"), BASE.replace(second_tag="perf/x")),
        (BASE.replace(second_tag="perf/x"), lambda v: views.with_second_tag(v, None), BASE),
        (BASE, views.next_x_mode, BASE.replace(x_mode="relative")),
        (BASE.replace(x_mode="relative"), views.next_x_mode, BASE.replace(x_mode="wall")),
        (BASE.replace(x_mode="wall"), views.next_x_mode, BASE),
        (BASE, views.toggle_log, BASE.replace(log_y=True)),
        (BASE.replace(log_y=True), views.toggle_log, BASE),
        (BASE, lambda v: views.smoothed(v, 1), BASE.replace(smoothing=0.7)),
        (BASE, lambda v: views.smoothed(v, -1), BASE.replace(smoothing=0.5)),
        (BASE.replace(smoothing=0.0), lambda v: views.smoothed(v, -1), BASE.replace(smoothing=0.0)),
        (BASE, lambda v: views.with_expression(v, "lr<1"),
         BASE.replace(table=TableView(expr="lr<1"))),
        (BASE, lambda v: views.with_table(v, TableView(sort="loss")),
         BASE.replace(table=TableView(sort="loss"))),
        (BASE, lambda v: views.with_note(v, "reloading…"), BASE.replace(note="reloading…")),
    ],
)
def test_each_key_makes_a_new_view(
    before: ViewState, step: Callable[[ViewState], ViewState], after: ViewState
) -> None:
    assert step(before) == after


@pytest.mark.parametrize(
    ("pattern", "focused", "typing", "pattern_after"),
    [
        ("q", None, False, ""),  # escape in the list: the filter goes
        ("q", "a", False, "q"),  # a job focused: escape leaves it, the filter stays
        ("q", "a", True, ""),  # typing in the filter box: cleared, whatever is focused
        ("", "a", False, ""),
        ("", None, True, ""),
    ],
)
def test_escape(pattern: str, focused: str | None, typing: bool, pattern_after: str) -> None:
    after = views.escaped(BASE.replace(pattern=pattern, focused_job=focused), typing)
    assert (after.pattern, after.focused_job) == (pattern_after, None)


@pytest.mark.parametrize(
    ("sort", "expr", "table"),
    [
        (None, "", TableView()),
        ("loss", "", TableView(sort="loss")),
        ("-loss", "lr<0.1", TableView(sort="loss", reverse=True, expr="lr<0.1")),
    ],
)
def test_initial_view_from_the_command_line(sort: str | None, expr: str, table: TableView) -> None:
    assert views.initial_view(sort, expr) == ViewState(table=table)


def _job(name: str) -> Job:
    return Job(name, RunLocation.on_this_machine(f"/logs/{name}"), {}, "live", None, (), ())


A, B, C = _job("a"), _job("b"), _job("c")


@pytest.mark.parametrize(
    ("view", "top", "shown"),
    [
        (BASE, (), (A,)),  # nothing chosen: the first visible job
        (BASE.replace(cursor_job="b"), (), (B,)),
        (BASE.replace(cursor_job="b", selected=frozenset("ca")), (), (A, C)),
        (BASE.replace(selected=frozenset("ca"), focused_job="b"), (), (B,)),
        (BASE.replace(cursor_job="a"), ("c", "b"), (C, B)),  # `o`: the top N by the sort
        (BASE.replace(focused_job="a"), ("c", "b"), (A,)),  # ... unless a job is focused
        (BASE.replace(focused_job="gone"), (), (A,)),
    ],
)
def test_charted_jobs(view: ViewState, top: tuple[str, ...], shown: tuple[Job, ...]) -> None:
    assert views.charted(view, (A, B, C), (A, B, C), top) == shown


@pytest.mark.parametrize(
    ("view", "title"),
    [
        (BASE, "loss (ema 0.6 · step)"),
        (BASE.replace(smoothing=0.0, x_mode="wall", log_y=True), "loss (ema 0 · wall · log)"),
    ],
)
def test_chart_title(view: ViewState, title: str) -> None:
    assert views.chart_title(view, "loss") == title


def test_status_text_carries_the_notes_in_order() -> None:
    snap = JobsSnapshot(0.0, ("/logs",), (A, B, C), (), (),
                        errors=(ProducerError("telemetry", "NVML went away", 0.0),))
    view = BASE.replace(pattern="a", selected=frozenset("b"), note="reloading…")
    text = views.status_text(view, snap, ["/logs"], 1, "bad expression")
    assert text == ("distmon  /logs  ·  1/3 jobs  ·  filter /a/  ·  1 selected  ·  reloading…"
                    "  ·  bad expression  ·  telemetry: NVML went away")
    assert views.status_text(ViewState(), None, ["/logs"], 0, None).endswith("0 jobs  ·  reading…")


@pytest.mark.parametrize(("shown", "total", "pattern", "expected"), [
    (1, 1, "", "1 job"), (2, 2, "", "2 jobs"), (0, 0, "", "0 jobs"),
    (1, 1, "a", "1/1 jobs"), (1, 3, "a", "1/3 jobs"),
])
def test_status_line_counts_jobs_in_their_number(
    shown: int, total: int, pattern: str, expected: str
) -> None:
    from distmon.render.view_model import status_line

    assert status_line(["/logs"], shown, total, pattern, 0, ()).split("  ·  ")[1] == expected
