"""distmon shows the jobs' TensorFlow profiles: a real Keras fit with the TensorBoard callback
profiling it and a sleeping map on one thread, no perf tags, beside jobs whose profiles are
hostile (truncated, random bytes, huge times and escape sequences in names, 200 MB). Through
the real paths: `distmon --once` text and JSON, `--serve` with `/metrics` and a webhook, the
dashboard over the logdir."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from distcore.snapshot import SNAPSHOT_VERSION
from tests.core.profile_files import hostile_space, write
from tests.json_shape import undocumented
from tests.kit.wait import until, wait_until
from tests.kit.webhook import Receiver
from tests.kit.writers import write_job
from tests.tui.conftest import ready
from tests.tui.test_live import app_over
from tests.tui.test_serve import ROOT, Serve, sample, scrape

pytestmark = pytest.mark.slow
SESSION = "2026_01_01_00_00_00"
HOSTILE = ("truncated", "random", "escapes", "huge")


def _hostile_job(logdir: Path, name: str, good: Path) -> Path:
    write_job(logdir, name, [1.0, 0.5])
    folder = logdir / name / "train" / "plugins" / "profile" / SESSION
    folder.mkdir(parents=True)
    path = folder / "host.xplane.pb"
    if name == "truncated":
        path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    elif name == "random":
        path.write_bytes(os.urandom(1 << 16))
    elif name == "escapes":
        write(path, hostile_space())
    else:
        with path.open("wb") as f:  # sparse: 200 MB that take no disk
            f.truncate(200 * 1024 * 1024)
    return path


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """keras_slow (tests/core/profile_runs.py: profile_batch=(3, 6), 20 ms a element in a map
    on one thread), then the hostile jobs beside it."""
    out = tmp_path_factory.mktemp("logs")
    subprocess.run(
        [sys.executable, "-m", "tests.core.profile_runs", str(out), "keras_slow"],
        cwd=ROOT, check=True, capture_output=True, timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    (good,) = (out / "keras_slow").glob("train/plugins/profile/*/*.xplane.pb")
    for name in HOSTILE:
        _hostile_job(out, name, good)
    return out


def distmon(*args: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        str(ROOT / p) for p in ("shared", "agent", "tui"))}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "distmon", "--once", "--no-gpu", *map(str, args)],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )


def _job_block(text: str, name: str) -> list[str]:
    """The lines under `job <name>:` up to the next job or run."""
    lines = text.splitlines()
    start = lines.index(next(line for line in lines if line.startswith(f"job {name}:")))
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        block.append(line)
    return block


def test_once_names_the_foreign_keras_job_input_bound_from_its_profile(logdir: Path) -> None:
    done = distmon(logdir)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    (alert,) = [line for line in done.stdout.splitlines() if "keras_slow/train: " in line]
    assert "critical keras_slow/train: Your program is highly input-bound" in alert
    assert "MapAndBatch" in alert and "`num_parallel_calls=tf.data.AUTOTUNE`" in alert
    block = _job_block(done.stdout, "keras_slow")
    assert any("step " in line and "input " in line and "device compute" in line
               for line in block)
    assert any(line.strip().startswith("bottleneck: MapAndBatch") for line in block)
    assert any("parallelism 1" in line for line in block)  # the stage, its parallelism
    # Each hostile profile: one line on its job, the rest of the report as it was.
    for name in ("truncated", "random", "huge"):
        (line,) = [x for x in _job_block(done.stdout, name) if "profile" in x]
        assert line.strip().startswith("profile: profile unreadable: "), line
    assert "200.0 MiB, over the 64.0 MiB size cap" in done.stdout
    escapes = "\n".join(_job_block(done.stdout, "escapes"))
    assert "\\x1b" in escapes and "\x1b" not in done.stdout and "\x07" not in done.stdout


def test_once_json_has_each_jobs_profile(logdir: Path) -> None:
    done = distmon("--json", logdir)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["version"] == SNAPSHOT_VERSION == 2
    assert undocumented(doc) == []
    jobs = {job["name"]: job["profile"] for job in doc["jobs"]}
    keras = jobs["keras_slow"]
    assert keras["kind"] == "summary" and keras["input_verdict"] == "highly input-bound"
    assert keras["bottleneck"]["stage"]["path"].endswith("::MapAndBatch")
    assert "num_parallel_calls" in keras["bottleneck"]["remedy"]
    assert keras["total"]["input_ms"] > 0 and keras["step_count"] >= 3
    for name in ("truncated", "random", "huge"):
        assert jobs[name]["kind"] == "error"
        assert jobs[name]["message"].startswith("profile unreadable: ")
    assert jobs["escapes"]["kind"] == "summary"
    kinds = {(a["run"], a["kind"]) for a in doc["alerts"]}
    assert ("keras_slow/train", "profile_input_bound") in kinds


def test_serve_exports_the_step_split_and_posts_the_alert(
    tmp_path: Path, logdir: Path
) -> None:
    receiver = Receiver()
    serve = Serve(tmp_path, ["--metrics", "0", "--notify", receiver.url, "--no-gpu",
                             str(logdir)])
    try:
        port = serve.port()

        def split() -> str | None:
            text = scrape(port)
            return text if 'distmon_profile_step_seconds{job="keras_slow"' in text else None

        text = str(wait_until(split, timeout=180))
        parts = {part: sample(text, "distmon_profile_step_seconds", job="keras_slow", part=part)
                 for part in ("input", "device_compute", "host_compute", "communication",
                              "other")}
        assert all(v is not None and v >= 0 for v in parts.values()), parts
        assert parts["input"] is not None and parts["input"] > 0.5 * sum(
            v for v in parts.values() if v is not None)
        assert sample(text, "distmon_profile_step_seconds", job="truncated") is None
        (posted,) = wait_until(lambda: [b for b in receiver.bodies
                                      if b["kind"] == "profile_input_bound"
                                      and b["text"].startswith("[critical] keras_slow/")],
                               timeout=180)
        assert "num_parallel_calls" in posted["text"] and "MapAndBatch" in posted["text"]
    finally:
        code = serve.stop(signal.SIGTERM)
        receiver.close()
    assert code == 0, serve.stderr()


async def test_the_dashboard_shows_the_focused_jobs_step_split(
    tmp_path: Path, logdir: Path
) -> None:
    from distmon.widgets.panels import Panel

    shutil.copytree(logdir / "keras_slow", tmp_path / "keras_slow")
    app = app_over(tmp_path)
    main = app.dashboard
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot, timeout=120)
        await until(pilot, lambda: main.jobs is not None and len(main.jobs.jobs) == 1, "the job")
        await pilot.press("enter")
        details = app.query_one("#details", Panel)
        await until(pilot, lambda: "bottleneck: MapAndBatch" in str(details.render()),
                    "the profile in the details")
        text = str(details.render())
        bar = next(line for line in text.splitlines() if line.startswith("profile ▓"))
        cells = bar.removeprefix("profile ").split(" ")[0]
        assert len(cells) == 40 and cells.startswith("▓" * 20)  # mostly input, input first
        assert "% input (highly input-bound)" in bar
        assert "num_parallel_calls" in text and "op " in text and "tf.data " in text
