"""`--once`'s text from the typed snapshot, and the formatters it shares with the panels."""

from __future__ import annotations

import io
import json
import math

import pytest

from distcore.jobs.jsonify import to_json
from distcore.jobs.snapshots import Host, Job, JobsSnapshot
from distcore.location import RunLocation
from distmon import formats
from distmon.once import render_text
from distmon.render.view_model import job_row
from tests.tui.fixed import NOW, gpu, keras_job, telemetry


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        (formats.step_text(None), "–"),
        (formats.step_text(1200), "1200"),
        (formats.number(None), "–"),
        (formats.number(0.123456789), "0.1235"),
        (formats.number(0.123456789, 6), "0.123457"),
        (formats.number(math.nan, 6), "nan"),
        (formats.number(-math.inf), "-inf"),
        (formats.share(0.34), "34%"),
        (formats.share(None), "–"),
        (formats.share(math.nan), "–"),
        (formats.age_text(None), "never sampled"),
        (formats.age_text(12.4), "12 s ago"),
        (formats.measured(None, "%"), "n/a"),
        (formats.measured(math.nan, "W"), "n/a"),
        (formats.measured(63.4, "°C"), "63°C"),
    ],
)
def test_formats(shown: str, expected: str) -> None:
    assert shown == expected


def _snapshot(jobs: tuple[Job, ...] = (), hosts: tuple[Host, ...] = ()) -> JobsSnapshot:
    local = telemetry([gpu(0, 80.0, 40_000.0)])
    return JobsSnapshot(NOW, ("/logs",), jobs, hosts, (), local_telemetry=local)


def _text(snap: JobsSnapshot) -> str:
    out = io.StringIO()
    render_text(snap, out)
    return out.getvalue()


def _job(name: str) -> Job:
    parts = {p.name.rpartition("/")[2]: p for p in keras_job(name)}
    return Job(name, RunLocation.on_this_machine(f"/logs/{name}"), parts, "live", None, (), ())


def test_the_report_and_the_table_read_a_figure_alike() -> None:
    job = _job("quickstart")
    text = _text(_snapshot((job,)))
    row = job_row(job)
    loss = next(line for line in text.splitlines() if line.strip().startswith("epoch_loss"))
    assert f"step {row.step:>8}" in loss  # one formatter for a step, the table's and the report's
    assert "GPU 0  NVIDIA A100-SXM4-80GB  util 80%  mem 39.1/80.0 GiB" in text


def test_a_worker_memory_sample_that_is_nan_reads_na() -> None:
    """A `system/` run can record NaN: the JSON writes "nan", the text says n/a (the report
    rendered from the JSON document raised TypeError on it)."""
    worker = Host("logdir:job/system/worker-1", "job worker 1", "logdir", worker=1, job="job",
                  sampled_at=NOW - 2, memory_used_mib=math.nan, memory_total_mib=81920.0)
    snap = _snapshot(hosts=(worker,))
    text = _text(snap)
    assert "job worker 1  2 s ago  cpu n/a  mem n/a/81920 MiB" in text
    assert json.loads(json.dumps(to_json(snap)))["hosts"][0]["memory_used_mib"] == "nan"


def test_names_that_print_alike_keep_apart_as_in_the_json() -> None:
    jobs = (_job("a\udcff"), _job("a\\xff"))  # the byte 0xFF, and the text `\xff`
    text = _text(_snapshot(jobs))
    names = [j["name"] for j in to_json(_snapshot(jobs))["jobs"]]
    assert names == ["a\\xff #2", "a\\xff"]
    assert "job a\\xff #2: live\n" in text and "job a\\xff: live\n" in text
