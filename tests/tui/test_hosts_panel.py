"""The GPU panel: its memory cell says what a host or GPU reports, never a made-up zero; its
history comes in the snapshot."""

from __future__ import annotations

from typing import Literal

import pytest
from textual.app import App, ComposeResult

from distcore import names
from distcore.jobs.snapshots import Host, JobsSnapshot
from distmon.render.hosts import _memory, gpus_title, render_hosts
from distmon.widgets.panels import AlertsPanel, GpusPanel
from tests.tui.fixed import NOW, gpu


@pytest.mark.parametrize(
    ("used", "total", "shown"),
    [
        (30 * 1024.0, 80 * 1024.0, "30.0/80.0G"),
        (30 * 1024.0, None, "30.0G used"),  # a worker's samples record no total
        (None, None, "n/a"),  # a worker's host line without memory samples
        (None, 80 * 1024.0, "n/a/80.0G"),  # MIG: used unknown, total known
    ],
)
def test_memory_cell(used: float | None, total: float | None, shown: str) -> None:
    assert _memory(used, total) == shown


def _snapshot(history: tuple[float | None, ...]) -> JobsSnapshot:
    local = Host("local", "here", "local", sampled_at=NOW, gpus=(gpu(0, 80.0, 40_000.0),))
    key = names.gpu_tag(0, "utilization")
    return JobsSnapshot(NOW, ("/logs",), (), (local,), (), local_history={key: history})


class _Board(App[None]):
    def compose(self) -> ComposeResult:
        yield GpusPanel(id="gpus")
        yield AlertsPanel(id="alerts")


async def test_the_gpu_panel_draws_the_history_the_snapshot_carries() -> None:
    """No sampler anywhere: the sparkline comes from `JobsSnapshot.local_history`, and a
    snapshot that shows the same hosts is not drawn again."""
    app = _Board()
    async with app.run_test(size=(100, 10)) as pilot:
        panel = app.query_one(GpusPanel)
        panel.show_snapshot(_snapshot((0.0, 50.0, 100.0)))
        await pilot.pause()
        assert str(panel.render()).rstrip().endswith("▁▅█")
        drawn = panel._draw
        panel.show_snapshot(_snapshot((100.0, 100.0, 100.0)))  # same hosts: kept
        assert panel._draw is drawn
        alerts = app.query_one(AlertsPanel)
        alerts.show_snapshot(_snapshot(()))
        assert str(alerts.render()) == "no alerts" and alerts.border_title == "alerts"


def test_workers_that_ran_here_are_named_under_this_machine_not_listed_again() -> None:
    local = Host("local", "gpu7", "local", sampled_at=NOW, gpus=(gpu(0, 80.0, 40_000.0),),
                 machine="gpu7")
    workers = [Host(f"logdir:mnist/system/worker-{i}", "gpu7", "logdir", worker=i, job="mnist",
                    sampled_at=NOW, gpus=(gpu(0, 70.0, 30_000.0),), machine="gpu7")
               for i in range(2)]
    text = render_hosts([local, *workers], lambda key: (), NOW, 100).plain
    assert text.count("A100") == 1 and "39.1/80.0G" in text and "29.3" not in text
    assert "also here: job mnist worker 0, job mnist worker 1" in text
    assert gpus_title([local, *workers]) == "GPUs"


@pytest.mark.parametrize(
    ("wide", "sm", "tensor", "shown"),
    [
        (True, 72.0, 42.0, " sm 72% occ 38% tensor 42% dram 56%"),
        (False, 72.0, 42.0, " sm 72% tc 42%"),
        (True, None, None, " occ 38% dram 56%"),  # a metric NVML refused: left out, not 0
    ],
)
def test_gpm_activity_sits_next_to_util(wide: bool, sm: float | None, tensor: float | None,
                                        shown: str) -> None:
    from dataclasses import replace

    from distmon.render.hosts import activity_text

    device = replace(gpu(0, 97.0, 40_000.0), sm_activity=sm, sm_occupancy=38.0,
                     tensor_activity=tensor, dram_bandwidth=56.0)
    assert activity_text(device, wide=wide).plain == shown


def test_a_gpu_without_gpm_shows_util_alone_and_the_reason_once() -> None:
    reason = "no GPM activity counters on any GPU: Not Supported"
    local = Host("local", "here", "local", sampled_at=NOW, gpm_reason=reason,
                 gpus=(gpu(0, 80.0, 40_000.0), gpu(1, 80.0, 40_000.0)))
    text = render_hosts([local], lambda key: (), NOW, 100).plain
    assert text.count(reason) == 1 and " sm " not in text


@pytest.mark.parametrize(
    ("source", "reason", "shown"),
    [
        ("local", "NVML Shared Library Not Found", "no GPU: NVML Shared Library Not Found"),
        ("local", None, "no GPU: unknown reason"),
        ("ssh", "nvidia-smi not found on gpu7", "no GPU: nvidia-smi not found on gpu7"),
        # Outside text: a remote's reason with terminal controls is shown escaped.
        ("ssh", "nvidia-smi \x1b[2J\x07gone", "no GPU: nvidia-smi \\x1b[2J\\x07gone"),
        ("ssh", None, None),  # a host that never said: nothing invented
    ],
)
def test_a_host_without_gpus_says_why_in_the_panel_and_the_report(
        source: Literal["local", "ssh"], reason: str | None, shown: str | None) -> None:
    import io

    from distmon.gpus_text import render_hosts_text

    host = Host("h", "gpu7", source, sampled_at=NOW, gpu_reason=reason)
    panel = render_hosts([host], lambda key: (), NOW, 100).plain
    report = io.StringIO()
    render_hosts_text([host], NOW, report)
    for text in (panel, report.getvalue()) if source != "local" else (panel,):
        assert (shown in text) if shown else "no GPU" not in text, text
        assert "\x1b" not in text and "\x07" not in text


def test_the_report_names_the_job_and_worker_of_each_host_line() -> None:
    """Two jobs' system/ runs from one host are two lines the reader can tell apart, as the
    dashboard's headings are; a name that already says its worker is not told it twice."""
    import io

    from distmon.gpus_text import render_hosts_text

    hosts = [
        # As host_from_system_run makes them: a recorded host name is also the machine.
        Host("logdir:a/system", "vm", "logdir", sampled_at=NOW, job="a", machine="vm"),
        Host("logdir:b/system", "vm", "logdir", sampled_at=NOW, job="b", machine="vm"),
        Host("logdir:c/system/worker-1", "gpu7", "logdir", sampled_at=NOW, job="c", worker=1,
             machine="gpu7"),
        Host("logdir:d/system/worker-0", "d worker 0", "logdir", sampled_at=NOW, job="d",
             worker=0),
    ]
    report = io.StringIO()
    render_hosts_text(hosts, NOW, report)
    lines = report.getvalue().splitlines()[2:]
    assert [line.split("  ")[0] for line in lines] == [
        "vm (job a)", "vm (job b)", "gpu7 (worker 1, job c)", "d worker 0"]


async def test_a_panel_whose_text_keeps_its_height_asks_for_no_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A layout draws the whole screen again: a live job's alerts, their words changed every
    refresh, made the dashboard draw everything every second."""
    from rich.text import Text

    app = _Board()
    async with app.run_test(size=(100, 10)) as pilot:
        panel = app.query_one(AlertsPanel)
        laid: list[bool] = []
        refresh = panel.refresh

        def counted_refresh(*a: object, layout: bool = False, **k: object) -> object:
            laid.append(layout)
            return refresh(*a, layout=layout, **k)  # type: ignore[arg-type]

        monkeypatch.setattr(panel, "refresh", counted_refresh)
        panel.update(Text("input wait 12%\nstalled for 3 s"))
        await pilot.pause()
        panel.update(Text("input wait 13%\nstalled for 4 s"))  # new words, the same lines
        await pilot.pause()
        panel.update(Text("input wait 13%\nstalled for 4 s\nhung"))  # one more line
        await pilot.pause()
        assert laid == [True, False, True]
        assert str(panel.render()).endswith("hung")
