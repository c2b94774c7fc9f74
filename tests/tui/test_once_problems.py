"""The logdirs' own problems reach both front ends: a FIFO named like an event file (never
opened), a directory that cannot be listed. Never silently skipped."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.kit.wait import until
from tests.kit.writers import scalar_records

EVENT_FILE = "events.out.tfevents.1.host"
PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2


def _as_ordinary_user() -> None:
    """In the child before exec: root without the capabilities that let it read any directory
    (dropped from the bounding set, so the new program never gets them), as a cluster user."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def once(logdir: Path, *args: str, ordinary: bool = False) -> subprocess.CompletedProcess[str]:
    drop: Callable[[], None] | None = _as_ordinary_user if ordinary else None
    return subprocess.run(
        [sys.executable, "-m", "distmon", "--once", "--no-gpu", *args, str(logdir)],
        capture_output=True, text=True, timeout=120, preexec_fn=drop,
    )  # fmt: skip


def test_a_fifo_is_a_problem_in_json_and_text(tmp_path: Path) -> None:
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / EVENT_FILE).write_bytes(scalar_records("loss", [(0, 1.0)]))
    (tmp_path / "bad").mkdir()
    os.mkfifo(tmp_path / "bad" / EVENT_FILE)
    doc = json.loads(once(tmp_path, "--json").stdout)
    assert [r["name"] for r in doc["runs"]] == ["good"]
    assert any("not a regular file" in p and "bad" in p for p in doc["problems"]), doc
    text = once(tmp_path).stdout
    assert "problem: " in text and "not a regular file" in text


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """A directory another user can reach (pytest's tmp_path is private to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="distmon-problems-"))
    path.chmod(0o755)
    yield path
    for sub in path.rglob("*"):
        if sub.is_dir():
            sub.chmod(0o755)
    shutil.rmtree(path)


def test_unreadable_files_and_directories_are_problems(world_readable_dir: Path) -> None:
    root = world_readable_dir
    (root / "run").mkdir(mode=0o755)
    events = root / "run" / EVENT_FILE
    events.write_bytes(scalar_records("loss", [(0, 1.0)]))
    events.chmod(0o644)
    (root / "locked").mkdir(mode=0o755)
    (root / "locked" / EVENT_FILE).write_bytes(scalar_records("loss", [(0, 1.0)]))
    (root / "locked" / EVENT_FILE).chmod(0)
    (root / "closed").mkdir(mode=0o755)
    (root / "closed" / "inner").mkdir()
    (root / "closed").chmod(0)
    # Root lists whatever the permissions say: look as an ordinary user, as a cluster user would.
    done = once(root, "--json", ordinary=os.geteuid() == 0)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    runs = {r["name"]: r for r in doc["runs"]}
    assert sorted(runs) == ["locked", "run"]
    assert runs["run"]["problems"] == [] and runs["run"]["scalars"]["loss"]["count"] == 1
    assert any("cannot open" in p for p in runs["locked"]["problems"]), runs["locked"]
    assert any("closed" in p and "cannot list" in p for p in doc["problems"]), doc["problems"]


async def test_the_dashboard_shows_the_logdirs_problems(tmp_path: Path) -> None:
    from distmon.app import DistmonApp
    from distmon.options import Options
    from distmon.widgets.panels import Panel

    (tmp_path / "bad").mkdir()
    os.mkfifo(tmp_path / "bad" / EVENT_FILE)
    app = DistmonApp(Options(logdirs=(tmp_path,), refresh=0.2, no_gpu=True))
    async with app.run_test(size=(120, 40)) as pilot:
        alerts = app.query_one("#alerts", Panel)
        await until(pilot, lambda: "not a regular file" in str(alerts.render()), "the fifo's alert")
        assert "▲ logdir: " in str(alerts.render()) and "bad" in str(alerts.render())
