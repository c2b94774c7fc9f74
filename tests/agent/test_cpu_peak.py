"""A CPU host's measured peak repeats: measured once (warmed, the median of several runs) and
kept per host with its date, so every job on the host divides by the same figure; measured
again when the figure is too old or the cache is not to be trusted. A job's workers on one host
count its cores once (launch-local: tests/agent/test_multiworker.py)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from distagent.cluster.layout import layout_from_workers
from distagent.cpu_peak import CACHE_DAYS, CACHE_NAME, CpuPeak, cached, host_peak, median_rate

TODAY = datetime.date(2026, 3, 1)
KEY = "node1 8 cores float32 tf 2.20.0"


def _entry(rate: Any, day: Any) -> dict[str, Any]:
    return {KEY: {"flops_per_second": rate, "measured_on": day}}


@pytest.mark.parametrize(
    ("doc", "found"),
    [
        (_entry(4e10, "2026-03-01"), CpuPeak(4e10, TODAY)),
        (_entry(4e10, "2026-02-01"), CpuPeak(4e10, datetime.date(2026, 2, 1))),
        (_entry(4e10, (TODAY - datetime.timedelta(days=CACHE_DAYS + 1)).isoformat()), None),
        (_entry(4e10, "2026-03-02"), None),  # from the future: a clock set back, not trusted
        (_entry(float("inf"), "2026-03-01"), None),
        (_entry(float("nan"), "2026-03-01"), None),
        (_entry(0, "2026-03-01"), None),
        (_entry(True, "2026-03-01"), None),
        (_entry("4e10", "2026-03-01"), None),
        (_entry(4e10, "yesterday"), None),
        (_entry(4e10, None), None),
        ({KEY: [4e10]}, None),
        ({"other host": {"flops_per_second": 4e10, "measured_on": "2026-03-01"}}, None),
        ([], None),
    ],
)
def test_a_cached_figure_is_used_only_when_whole_and_recent(doc: Any, found: CpuPeak | None
                                                            ) -> None:  # fmt: skip
    assert cached(doc, KEY, TODAY) == found


def test_the_median_run_makes_the_rate() -> None:
    # One run slowed by another process does not move it, as the best or the mean would.
    assert median_rate(1000, [0.1, 0.1, 0.1, 0.9, 0.05]) == pytest.approx(2e9 / 0.1)


def test_the_figure_repeats_from_the_cache_until_it_is_old(tf: Any, tmp_path: Path) -> None:
    environ = {"DISTMON_CACHE_DIR": str(tmp_path)}
    first = host_peak(tf, tf.float32, environ=environ, today=TODAY)
    assert first.measured_on == TODAY and first.flops_per_second > 1e8
    doc = json.loads((tmp_path / CACHE_NAME).read_text())
    ((key, entry),) = doc.items()
    assert entry == {"flops_per_second": first.flops_per_second, "measured_on": "2026-03-01"}
    assert "float32" in key and tf.__version__ in key
    later = TODAY + datetime.timedelta(days=CACHE_DAYS)
    assert host_peak(tf, tf.float32, environ=environ, today=later) == first  # the same figure
    renewed = host_peak(tf, tf.float32, environ=environ, today=later + datetime.timedelta(1))
    assert renewed.measured_on == later + datetime.timedelta(1)
    assert json.loads((tmp_path / CACHE_NAME).read_text())[key]["measured_on"] == "2026-04-01"


def test_a_cache_that_is_not_json_is_measured_over(tf: Any, tmp_path: Path) -> None:
    (tmp_path / CACHE_NAME).write_bytes(b"\x00not json")
    peak = host_peak(tf, tf.float32, environ={"DISTMON_CACHE_DIR": str(tmp_path)}, today=TODAY)
    assert peak.measured_on == TODAY
    assert json.loads((tmp_path / CACHE_NAME).read_text())


@pytest.mark.parametrize(
    ("workers", "hosts"),
    [
        (["127.0.0.1:2001", "127.0.0.1:2002", "127.0.0.1:2003"], 1),  # launch-local
        (["node1:2222", "node2:2222"], 2),
        (["node1:2222", "node1:2223", "node2:2222"], 2),
        (["[::1]:2001", "[::1]:2002"], 1),
    ],
)
def test_a_clusters_hosts_are_counted_once(workers: list[str], hosts: int) -> None:
    assert layout_from_workers(workers, 0).hosts == hosts
