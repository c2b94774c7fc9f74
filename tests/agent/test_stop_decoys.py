"""`distagent stop` signals only a process whose environment names the run directory.

The decoys are real processes a user has open beside a run, each one whose command line holds
the resolved run directory (the old, substring-style proof accepted them): `tail -f` on its
output, a watcher given the directory as an argument, and one whose command line is exactly
what `distagent start` would have had. run.json records each one's real pid and start time, so
only the missing environment marker can tell them apart.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from distagent.train.rundir import RUN_DIR_ENV
from distcore import names
from tests.kit.wait import wait_until

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
SLEEPER = "import time; time.sleep(120)"

Decoy = Callable[[Path], list[str]]
DECOYS: list[tuple[str, Decoy]] = [
    ("tail", lambda d: [shutil.which("tail") or "tail", "-f", str(d / "output.log")]),
    ("watcher", lambda d: [sys.executable, "-c", SLEEPER, "watch", str(d)]),
    ("distmon-argv", lambda d: [sys.executable, "-c", SLEEPER, "distmon", str(d)]),
    ("start-argv", lambda d: [sys.executable, "-c", SLEEPER, "distagent", "start", "--run-dir",
                              str(d)]),
]


def agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distagent", *args], capture_output=True,
                          text=True, env=ENV, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("make", [m for _, m in DECOYS], ids=[n for n, _ in DECOYS])
def test_a_process_that_merely_names_the_run_dir_is_never_signalled(
    tmp_path: Path, make: Decoy
) -> None:
    run_dir = (tmp_path / "run").resolve()
    run_dir.mkdir()
    (run_dir / "output.log").write_text("")
    env = {k: v for k, v in ENV.items() if k != RUN_DIR_ENV}
    decoy = subprocess.Popen(make(run_dir), env=env, stdout=subprocess.DEVNULL)
    try:
        proc = psutil.Process(decoy.pid)
        # The decoy does name it, once its exec is done (a fresh child's cmdline is empty for a
        # moment, longer on a loaded machine): wait for that, bounded.
        wait_until(lambda: str(run_dir) in " ".join(proc.cmdline()), "the decoy's command line",
                   30, detail=lambda: str(proc.cmdline()))
        (run_dir / names.RUN_JSON).write_text(json.dumps(
            {"status": names.STATUS_RUNNING, "pid": decoy.pid,
             "pid_create_time": proc.create_time()}))
        stop = agent("stop", str(run_dir), "--timeout", "1")
        assert stop.returncode == 2, stop.stderr
        assert "does not name this run directory" in stop.stderr
        assert "nothing signalled" in stop.stderr and stop.stderr.count("\n") == 1
        assert decoy.poll() is None  # alive: no signal reached it
        listed = agent("status", str(tmp_path), "--json")
        assert json.loads(listed.stdout)[0]["alive"] is False
    finally:
        decoy.kill()
        decoy.wait()


def test_the_environment_marker_is_the_proof(tmp_path: Path) -> None:
    """The control: the same decoy, with the marker, is the run and is stopped."""
    run_dir = (tmp_path / "run").resolve()
    run_dir.mkdir()
    decoy = subprocess.Popen([sys.executable, "-c", SLEEPER],
                             env={**ENV, RUN_DIR_ENV: str(run_dir)})
    try:
        (run_dir / names.RUN_JSON).write_text(json.dumps(
            {"status": names.STATUS_RUNNING, "pid": decoy.pid,
             "pid_create_time": psutil.Process(decoy.pid).create_time()}))
        stop = agent("stop", str(run_dir), "--timeout", "30")
        assert stop.returncode == 0, stop.stderr
        assert decoy.wait(timeout=30) == -15
    finally:
        decoy.kill()
        decoy.wait()
