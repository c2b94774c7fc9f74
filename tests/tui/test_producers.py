"""The dashboard's start through ProducerSet.launch: snapshots and the scan's end handed to the
caller, failures reported (never raised), nothing started once closed."""

from __future__ import annotations

import threading
from pathlib import Path

from distcore.jobs.snapshots import JobsSnapshot
from distmon.app import DistmonApp
from distmon.options import Options
from distmon.producers import Producers, ProducerSet, make_producers
from distmon.widgets.panels import StatusLine
from tests.kit.wait import until
from tests.kit.writers import write_scalars


def test_launch_reads_watches_and_reports_the_scan(tmp_path: Path) -> None:
    write_scalars(tmp_path / "j" / "train", [1.0, 0.5], tag="epoch_loss")
    options = Options(logdirs=(tmp_path,), no_gpu=True, poll=True, refresh=0.2)
    producers = ProducerSet(make_producers(options), options)
    scans: list[tuple[float, str | None]] = []
    shown = threading.Event()

    def snapshot(snap: JobsSnapshot) -> None:
        if [j.name for j in snap.jobs] == ["j"]:
            shown.set()

    try:
        producers.launch(snapshot, lambda seconds, error: scans.append((seconds, error)))
        assert [error for _, error in scans] == [None] and scans[0][0] >= 0.0
        assert shown.wait(60), "no snapshot with the job"  # bounds a failure only
        producers.timed_scan(lambda seconds, error: scans.append((seconds, error)))
        assert [error for _, error in scans] == [None, None]
    finally:
        producers.close()  # the autouse thread-leak guard checks that each one ended


def _broken() -> Producers:
    raise RuntimeError("NVML exploded")


def test_a_failing_build_is_reported_not_raised(tmp_path: Path) -> None:
    scans: list[tuple[float, str | None]] = []
    producers = ProducerSet(_broken, Options(logdirs=(tmp_path,)))
    producers.launch(lambda snap: None, lambda seconds, error: scans.append((seconds, error)))
    assert scans == [(0.0, "RuntimeError: NVML exploded")]
    producers.close()


def test_a_set_closed_before_launch_starts_nothing(tmp_path: Path) -> None:
    options = Options(logdirs=(tmp_path,), no_gpu=True)
    producers = ProducerSet(make_producers(options), options)
    producers.close()
    scans: list[tuple[float, str | None]] = []
    producers.launch(lambda snap: None, lambda seconds, error: scans.append((seconds, error)))
    assert scans == [] and producers.index.latest() is None


async def test_the_dashboard_says_why_its_producers_failed(tmp_path: Path) -> None:
    app = DistmonApp(Options(logdirs=(tmp_path,)), producers=_broken)
    async with app.run_test() as pilot:
        status = app.query_one(StatusLine)
        await until(pilot, lambda: "scan failed" in str(status.render()), "the scan's failure",
                    30, every=0.02)
        assert "scan failed: RuntimeError: NVML exploded" in str(status.render())
