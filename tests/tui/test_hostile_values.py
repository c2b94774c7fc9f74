"""One co-user's hostile numbers never blind the rest, in all four front ends.

A logdir holds a normal job that failed (a real alert from run.json) and is input-bound (a real
alert from its points), beside a hostile job: a run.json with 400-digit integers where numbers
go, a ledger of 1e308 seconds, and `perf/` tags of -5, inf, nan and 1e40. `--once`, `--once
--json`, `--serve --metrics` (scraped over HTTP) and the dashboard each show both jobs, the
normal one's alerts, and no exported value outside its documented range.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

from distcore import jobs, names
from distcore.bounded import MAX_SECONDS
from distmon.widgets.panels import Panel
from tests.kit.wait import until, wait_until
from tests.tui.test_live import app_over, rows
from tests.tui.test_serve import ROOT, Serve, scrape
from tests.untrusted import Point, write_run

HUGE = int("9" * 400)
HOSTILE = [-5.0, math.inf, math.nan, 1e40]
ENV = {"PYTHONPATH": ":".join(str(ROOT / p) for p in ("shared", "agent", "tui"))}


def hostile_run_json() -> dict[str, object]:
    return {
        "status": "running", "last_step": HUGE, "start_time": HUGE, "end_time": HUGE,
        "pid": HUGE, "total_steps": HUGE,
        "plan": {"replicas": HUGE, "global_batch_size": HUGE, "learning_rate": HUGE,
                 "base_learning_rate": 1e308, "per_replica_batch_size": HUGE},
        "ledger": dict.fromkeys(jobs.ledger.BUCKETS, 1e308), "ledger_wall": 1e308,
        "ledger_time": HUGE,
        "workers": {"0": {"worker": 0, "time": HUGE, "step": HUGE, "step_time": HUGE,
                          "beat_seconds": HUGE, "hang_seconds": 1e308,
                          "perf": {"step_seconds": HUGE}}},
        "recoveries": [{"step": HUGE, "lr_before": HUGE, "lr_after": 1e308}],
    }  # fmt: skip


def points(tag: str, values: list[float], start: float) -> list[Point]:
    return [Point(tag.encode(), step, value, start + step, "double")
            for step, value in enumerate(values)]


def write_logdir(logdir: Path) -> None:
    start = time.time() - 30
    perf = (names.INPUT_WAIT_FRACTION, names.MFU, names.EXAMPLES_PER_SECOND, names.STEP_TIME_MS)
    hostile = points("loss", [1.0 - 0.01 * i for i in range(24)], start)
    for shift, tag in enumerate(perf):  # each tag ends on another hostile value
        hostile += points(tag, [HOSTILE[(i + shift) % 4] for i in range(24)], start)
    write_run(logdir / "hostile" / "train", sorted(hostile, key=lambda p: p.step))
    system = [names.gpu_tag(0, f) for f in (*names.GPU_FIELDS, *names.GPM_FIELDS)]
    system += [names.HOST_CPU_PERCENT, names.HOST_MEMORY_USED_MIB]
    samples = [p for shift, tag in enumerate(system)
               for p in points(tag, [HOSTILE[(i + shift) % 4] for i in range(8)], start)]
    write_run(logdir / "hostile" / "system", sorted(samples, key=lambda p: p.step))
    (logdir / "hostile" / "run.json").write_text(json.dumps(hostile_run_json()))
    normal = points("loss", [1.0 - 0.01 * i for i in range(24)], start)
    normal += points(names.INPUT_WAIT_FRACTION, [0.5] * 24, start)
    normal += points(names.MFU, [0.4] * 24, start)
    write_run(logdir / "normal" / "train", sorted(normal, key=lambda p: p.step))
    (logdir / "normal" / "run.json").write_text(
        json.dumps({"status": "failed", "last_step": 23, "error": "out of memory"}))


def distmon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distmon", *args], capture_output=True,
                          text=True, timeout=300, env=ENV)


def test_once_shows_both_jobs_and_the_normal_ones_alerts(tmp_path: Path) -> None:
    write_logdir(tmp_path)
    done = distmon("--once", str(tmp_path))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "job hostile: running" in done.stdout and "job normal: failed" in done.stdout
    assert "normal: job failed at step 23: out of memory" in done.stdout
    assert "normal/train: Your program is highly input-bound: 50% of the step" in done.stdout
    assert "hostile/train: Your program" not in done.stdout  # 1e40 is no fraction
    alerts = done.stdout.partition("\nAlerts: ")[2]
    assert alerts.startswith("2\n") and "%" not in alerts.replace("50%", ""), alerts
    checked = distmon("--once", "--check", str(tmp_path))
    assert checked.returncode == 1 and "job hostile: running" in checked.stdout  # critical: normal


def test_once_json_is_one_valid_document_with_both_jobs(tmp_path: Path) -> None:
    write_logdir(tmp_path)
    done = distmon("--once", "--json", str(tmp_path))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    by_name = {j["name"]: j for j in doc["jobs"]}
    assert by_name["hostile"]["status"] == "running" and by_name["normal"]["status"] == "failed"
    assert by_name["hostile"]["last_step"] is None and by_name["hostile"]["mfu"] is None
    assert by_name["normal"]["mfu"] == 0.4
    ledger = by_name["hostile"]["ledger"]
    assert ledger is None or ledger["source"] != "agent"  # 1e308 s is no job's: unknown
    kinds = {(a["run"], a["kind"]) for a in doc["alerts"]}
    assert {("normal", "job_failed"), ("normal/train", "input_stall")} <= kinds
    assert not any(run.startswith("hostile") and kind == "input_stall" for run, kind in kinds)


RANGES = {  # docs/serve.md's ranges of the families these jobs feed
    "distmon_mfu_ratio": (0.0, 1.0),
    "distmon_job_goodput_ratio": (0.0, 1.0),
    "distmon_job_time_seconds": (0.0, MAX_SECONDS),
    "distmon_job_end_timestamp_seconds": (0.0, 1e11),
    "distmon_job_replicas": (0.0, 2.0**63),
    "distmon_job_global_batch_size": (0.0, 2.0**63),
}


def test_serve_exports_the_normal_job_and_nothing_out_of_range(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    logdir = tmp_path / "logs"
    write_logdir(logdir)
    serve = Serve(tmp_path, ["--metrics", "127.0.0.1:0", "--no-gpu", str(logdir)])
    try:
        port = serve.port()

        def both() -> str | None:
            text = scrape(port)
            return text if 'distmon_mfu_ratio{job="normal"}' in text and \
                'kind="job_failed"' in text and 'job="hostile"' in text else None

        text = str(wait_until(both))
    finally:
        assert serve.stop() == 0, serve.stderr()
    assert "Traceback" not in serve.stderr() and "OverflowError" not in serve.stderr()
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    for s in samples:
        if s.name in RANGES:
            low, high = RANGES[s.name]
            assert low <= s.value <= high, s
        if s.name == "distmon_scalar" and s.labels["tag"].startswith("perf/"):
            assert 0 <= s.value <= 1, s  # both jobs' perf/ tags here are fractions or dropped
        if s.name.endswith("_ratio"):  # a GPU's, a host's, a job's: 0-1 as documented
            assert 0 <= s.value <= 1, s
        if s.labels.get("job") == "hostile" and s.name != "distmon_scalar":
            assert math.isfinite(s.value), s
    mfu = {s.labels["job"]: s.value for s in samples if s.name == "distmon_mfu_ratio"}
    assert mfu == {"normal": 0.4}
    states = {(s.labels["job"], s.labels["distmon_job_status"]) for s in samples
              if s.name == "distmon_job_status" and s.value == 1}
    assert states == {("hostile", "running"), ("normal", "failed")}


async def test_the_dashboard_shows_both_rows_and_the_alerts(tmp_path: Path) -> None:
    write_logdir(tmp_path)
    app = app_over(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: set(rows(app)) == {"hostile", "normal"}, "both rows")
        assert rows(app)["hostile"][0] == "running" and rows(app)["normal"][0] == "failed"
        assert app.index is not None and not app.index.errors()
        alerts = app.query_one("#alerts", Panel)
        await until(pilot, lambda: "job failed at step 23" in str(alerts.render()), "the alert")
