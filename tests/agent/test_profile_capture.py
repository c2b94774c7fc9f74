"""Profiles taken by real jobs: a `[profile]` window on an input-bound job reads, in distcore's
own analysis, the input share the job measured itself; `distagent profile` on a running job
makes a new profile that `distmon --once --json` shows; a job that asked for none starts no
profiler."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distagent.config import config_from_dict
from distcore import names
from tests.agent.test_cli_runs import ENV, QUICKSTART, agent, overrides, record, wait_for

pytestmark = pytest.mark.slow
LOG_EVERY = 4
WINDOW = (8, 24)  # four whole log intervals: the job's own timing covers the same steps
# Input at 8 ms an example: the job is input-bound at every log point on a loaded machine
# too (at 2 ms, a loaded machine's slower compute took it under 20% now and then).
# The job's in-graph wait also holds the scheduling of its timestamps around the get-next
# (milliseconds now and then on a loaded machine), which the profile's get-next spans leave
# out: the long steps of costly input leave that small, and four intervals
# average it, so the two agree within the 2 points asked on a loaded machine too.
TOLERANCE = 0.02


def input_bound_job(
    logdir: Path, profile: dict[str, Any], steps: int = 28, cost_ms: float = 8.0
) -> Any:
    per_replica = 16
    return config_from_dict({
        "run": {"name": "job", "logdir": str(logdir), "seed": 3},
        "strategy": {"kind": "mirrored", "cpu_replicas": 2},
        "data": {  # a naive pipeline of cost_ms per example: the steps wait for their input
            "source": "synthetic", "per_replica_batch_size": per_replica,
            "validation_fraction": 0.0, "optimize": False,
            "synthetic": {"num_examples": steps * 2 * per_replica, "num_classes": 10,
                          "input_shape": [28, 28, 1], "preprocess_cost_ms": cost_ms},
        },
        "model": {"name": "mlp"},
        "train": {"epochs": 1, "log_every_steps": LOG_EVERY, "checkpoint_every_steps": 0},
        "profile": profile,
    })


class Counted:
    """The TensorFlow profiler's start and traces, counted on their way through."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from distagent.train.profiling import TensorFlowProfiler

        self.starts, self.traces = 0, 0
        real_start, real_trace = TensorFlowProfiler.start, TensorFlowProfiler.trace

        def counted_start(backend: TensorFlowProfiler, logdir: str) -> None:
            self.starts += 1
            real_start(backend, logdir)

        def counted_trace(backend: TensorFlowProfiler, step: int) -> Any:
            self.traces += 1
            return real_trace(backend, step)

        monkeypatch.setattr(TensorFlowProfiler, "start", counted_start)
        monkeypatch.setattr(TensorFlowProfiler, "trace", counted_trace)


def job_input_share(run_dir: Path, first: int, last: int) -> float:
    """The job's own input wait over the log intervals from `first` to `last` (equal steps
    each): their waits over their wall time."""
    from distcore.events import load_once

    (train,) = [r for r in load_once([run_dir]) if r.name == names.TRAIN_DIR]
    at = {tag: dict(zip(train.scalars[tag].steps, train.scalars[tag].values, strict=True))
          for tag in (names.INPUT_WAIT_MS, "perf/step_time_ms")}
    logged = range(first, last + 1, LOG_EVERY)
    return sum(at[names.INPUT_WAIT_MS][s] for s in logged) / \
        sum(at["perf/step_time_ms"][s] for s in logged)


def test_a_window_profiles_the_input_share_the_job_measured(
    tf: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distagent.train import run_job
    from distcore.profile import ProfileSummary, find_profiles, summarize

    counted = Counted(monkeypatch)
    assert run_job(input_bound_job(tmp_path, {"steps": list(WINDOW)})) == names.STATUS_FINISHED
    assert (counted.starts, counted.traces) == (1, WINDOW[1] - WINDOW[0])
    (path,) = find_profiles(tmp_path / "job")
    assert path.parent.parent.parent.parent == tmp_path / "job" / names.TRAIN_DIR
    summary = summarize(path)
    assert isinstance(summary, ProfileSummary), summary
    assert summary.step_source == "step markers"
    assert summary.step_count == WINDOW[1] - WINDOW[0]
    assert [s.number for s in summary.steps][:2] == [WINDOW[0], WINDOW[0] + 1]
    measured = job_input_share(tmp_path / "job", WINDOW[0] + LOG_EVERY, WINDOW[1])
    assert measured >= names.INPUT_WAIT_HIGH
    assert abs(summary.input_percent / 100 - measured) <= TOLERANCE, \
        (summary.input_percent, measured)


def test_an_input_bound_job_profiles_itself_once_per_interval(
    tf: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distagent.train import run_job
    from distcore.profile import find_profiles

    counted = Counted(monkeypatch)
    cfg = input_bound_job(tmp_path, {"on_input_bound": True, "input_bound_steps": 3}, steps=20)
    assert run_job(cfg) == names.STATUS_FINISHED
    # Every log point reads input-bound; the first one opens the window, the interval the rest.
    assert (counted.starts, counted.traces) == (1, 3)
    assert len(find_profiles(tmp_path / "job")) == 1


def test_a_job_that_asks_for_no_profile_starts_no_profiler(
    tf: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distagent.train import run_job

    counted = Counted(monkeypatch)
    assert run_job(input_bound_job(tmp_path, {}, steps=8)) == names.STATUS_FINISHED
    assert (counted.starts, counted.traces) == (0, 0)
    assert not (tmp_path / "job" / names.TRAIN_DIR / "plugins").exists()


def test_distagent_profile_on_a_running_job_shows_in_distmon(tmp_path: Path) -> None:
    run_dir = tmp_path / "job"
    job = subprocess.Popen(  # long enough to be stepping still when asked
        agent("start", str(QUICKSTART), *overrides(tmp_path, "job"), "--set", "train.epochs=50"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    try:
        wait_for(lambda: (record(run_dir).get("last_step") or 0) > 0, job, timeout=300)
        asked = subprocess.run(agent("profile", str(run_dir), "--steps", "5"),
                               capture_output=True, text=True, env=ENV, timeout=300)
        assert asked.returncode == 0, asked.stderr
        path = Path(asked.stdout.strip())
        assert path.is_file() and path.name.endswith(".xplane.pb")
        assert run_dir / names.TRAIN_DIR in path.parents
        shown = subprocess.run(
            [sys.executable, "-m", "distmon", "--once", "--json", "--no-gpu", str(tmp_path)],
            capture_output=True, text=True, env=ENV, timeout=300)
        assert shown.returncode == 0, shown.stderr
        (profile,) = [j["profile"] for j in json.loads(shown.stdout)["jobs"]
                      if j["name"] == "job"]
        assert profile["kind"] == "summary" and profile["path"] == str(path), profile
        assert profile["step_count"] >= 5 and profile["step_source"] == "step markers"
    finally:
        job.send_signal(signal.SIGTERM)
        out, _ = job.communicate(timeout=120)
    assert "profile of steps " in out and "(requested)" in out, out


def test_distagent_profile_refuses_what_it_cannot_profile_in_one_line(tmp_path: Path) -> None:
    missing = subprocess.run(agent("profile", str(tmp_path / "none")),
                             capture_output=True, text=True, env=ENV, timeout=120)
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith("no such run (no readable run.json: no such file)")
    (tmp_path / names.RUN_JSON).write_text(json.dumps({"status": names.STATUS_FINISHED}))
    ended = subprocess.run(agent("profile", str(tmp_path), "--steps", "3"),
                           capture_output=True, text=True, env=ENV, timeout=120)
    assert ended.returncode == 2 and len(ended.stderr.splitlines()) == 1
    assert "not running (status finished)" in ended.stderr
    assert not (tmp_path / "profile-request.json").exists()


def test_under_multi_worker_the_chief_alone_profiles(tmp_path: Path) -> None:
    from distcore.profile import ProfileSummary, find_profiles, summarize
    from tests.agent.test_multiworker import child_env, write_config

    config = write_config(tmp_path, steps=4)
    config.write_text(config.read_text() + "[profile]\nsteps = [2, 4]\n")
    done = subprocess.run(agent("launch-local", str(config), "--workers", "2"),
                          capture_output=True, text=True, env=child_env(), timeout=240)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (path,) = find_profiles(tmp_path / "runs" / "mw")  # the workers share a host name
    summary = summarize(path)
    assert isinstance(summary, ProfileSummary) and summary.step_count == 2, summary
