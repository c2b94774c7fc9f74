"""`distmon --once --check` over real event files and run.json: a job that ended long ago no
longer fails the check (a cron job would mail on every run); one that goes on, or ended within
--ended-within seconds, does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.kit.writers import write_scalars

HOUR = 3600.0


def _job(root: Path, name: str, ended_ago: float | None, record: dict[str, object] | None) -> None:
    """A job whose points and files are `ended_ago` seconds old (None: written now), with a NaN
    loss, and run.json where `record` is given (its end_time that old too)."""
    when = time.time() - (ended_ago or 0.0)
    run = root / name / "train"
    write_scalars(run, [1.0, 0.5, float("nan")], when - 3)
    if record is not None:
        (root / name / "run.json").write_text(json.dumps({**record, "end_time": when}))
    for path in (run, *run.iterdir()):
        os.utime(path, (when, when))


def _distmon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distmon", "--once", *args], capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip


def _check(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _distmon("--check", "--no-gpu", *extra, str(root))


FAILED = {"status": "failed", "last_step": 2, "error": "boom"}


@pytest.mark.parametrize(
    ("ended_ago", "record", "code"),
    [
        (2 * HOUR, FAILED, 0),  # failed two hours ago: history
        (60.0, FAILED, 1),  # failed a minute ago: the cron job hears of it
        (2 * HOUR, None, 0),  # TensorBoard files that stopped two hours ago
        (2 * HOUR, {"status": "running"}, 1),  # run.json says it goes on: counted however old
    ],
)
def test_an_ended_jobs_alerts_are_history(
    tmp_path: Path, ended_ago: float, record: dict[str, object] | None, code: int
) -> None:
    _job(tmp_path, "job", ended_ago, record)
    done = _check(tmp_path)
    assert done.returncode == code, done.stdout + done.stderr
    assert "✖" in done.stdout  # the report still shows the critical alert


def test_ended_within_sets_how_long_they_count(tmp_path: Path) -> None:
    _job(tmp_path, "job", 2 * HOUR, FAILED)
    assert _check(tmp_path, "--ended-within", str(3 * HOUR)).returncode == 1
    assert _check(tmp_path, "--ended-within", "60").returncode == 0


def test_ended_within_needs_check(tmp_path: Path) -> None:
    done = _distmon("--ended-within", "60", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["distmon: --ended-within needs --check (see --help)"]
