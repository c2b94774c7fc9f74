"""`distagent stop` and `status` call a process the run only when proven, through the real CLI.

Decoys are real processes: one with "distagent" in its arguments that must survive every
forged run.json, and, as the control that shows the test can fail, one whose environment names
the run directory, which `stop` does signal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distagent.train.rundir import RUN_DIR_ENV, process_mismatch
from distcore import names
from distcore.textsafe import terminal_text

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
SLEEPER = "import time; time.sleep(120)"


def agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distagent", *args], capture_output=True,
                          text=True, env=ENV, timeout=60)


def spawn(*extra_args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", SLEEPER, *extra_args], env=env)


@pytest.fixture
def decoy() -> Iterator[subprocess.Popen[bytes]]:
    """A live process with 'distagent' in its arguments: not the run."""
    proc = spawn("distagent", "start", "quickstart.toml")
    yield proc
    proc.kill()
    proc.wait()


def created(proc: subprocess.Popen[bytes]) -> float:
    return psutil.Process(proc.pid).create_time()


def write_record(run_dir: Path, **fields: Any) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    record = {"status": names.STATUS_RUNNING, "last_step": 7, **fields}
    # allow_nan: NaN and Infinity are what a hostile or broken writer may leave there.
    (run_dir / names.RUN_JSON).write_text(json.dumps(record, allow_nan=True))


Forge = Callable[[subprocess.Popen[bytes]], dict[str, Any]]
FORGED: list[tuple[str, Forge]] = [
    ("pid-zero", lambda d: {"pid": 0, "pid_create_time": created(d)}),
    ("pid-negative", lambda d: {"pid": -1, "pid_create_time": created(d)}),
    ("pid-minus-pgid", lambda d: {"pid": -d.pid, "pid_create_time": created(d)}),
    ("pid-true", lambda d: {"pid": True, "pid_create_time": created(d)}),
    ("pid-string", lambda d: {"pid": str(d.pid), "pid_create_time": created(d)}),
    ("pid-float", lambda d: {"pid": float(d.pid), "pid_create_time": created(d)}),
    ("pid-nan", lambda d: {"pid": float("nan"), "pid_create_time": created(d)}),
    ("pid-huge", lambda d: {"pid": 2**70, "pid_create_time": created(d)}),
    ("pid-missing", lambda d: {"pid_create_time": created(d)}),
    ("time-nan", lambda d: {"pid": d.pid, "pid_create_time": float("nan")}),
    ("time-inf", lambda d: {"pid": d.pid, "pid_create_time": float("inf")}),
    ("time-string", lambda d: {"pid": d.pid, "pid_create_time": str(created(d))}),
    ("time-bool", lambda d: {"pid": d.pid, "pid_create_time": True}),
    ("time-other", lambda d: {"pid": d.pid, "pid_create_time": created(d) - 3600}),
    # Everything right but the proof: alive, exact start time, "distagent" in its arguments.
    ("decoy-exact", lambda d: {"pid": d.pid, "pid_create_time": created(d)}),
]


@pytest.mark.parametrize("forge", [f for _, f in FORGED], ids=[n for n, _ in FORGED])
def test_forged_records_signal_nothing(
    tmp_path: Path, decoy: subprocess.Popen[bytes], forge: Forge
) -> None:
    run_dir = tmp_path / "run"
    write_record(run_dir, **forge(decoy))

    stop = agent("stop", str(run_dir), "--timeout", "1")
    assert stop.returncode == 2
    (line,) = stop.stderr.splitlines()
    assert line.startswith(f"distagent: {run_dir}: not running: pid ")
    assert "nothing signalled" in line and line.isprintable()
    assert decoy.poll() is None  # the decoy is alive: no signal reached it

    table = agent("status", str(tmp_path))
    assert table.returncode == 0, table.stderr
    assert "running (dead)" in table.stdout
    listed = agent("status", str(tmp_path), "--json")
    (row,) = json.loads(listed.stdout)
    assert row["alive"] is False


def test_a_proven_process_is_signalled(tmp_path: Path) -> None:
    """The control: the same checks accept a process whose environment names the run directory
    (a command line that merely contains it does not count: tests/agent/test_stop_decoys.py)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    named = str(run_dir.resolve())
    proc = spawn(env={**ENV, RUN_DIR_ENV: named})
    try:
        write_record(run_dir, pid=proc.pid, pid_create_time=created(proc))
        listed = agent("status", str(tmp_path), "--json")
        assert json.loads(listed.stdout)[0]["alive"] is True
        stop = agent("stop", str(run_dir), "--timeout", "30")
        assert stop.returncode == 0, stop.stderr
        assert proc.wait(timeout=10) == -15  # SIGTERM, from `distagent stop`
    finally:
        proc.kill()
        proc.wait()


def test_a_process_naming_another_run_is_not_this_run(tmp_path: Path) -> None:
    other = str((tmp_path / "other").resolve())
    proc = spawn(env={**ENV, RUN_DIR_ENV: other})
    try:
        run_dir = tmp_path / "run"
        write_record(run_dir, pid=proc.pid, pid_create_time=created(proc))
        stop = agent("stop", str(run_dir), "--timeout", "1")
        assert stop.returncode == 2 and "does not name this run directory" in stop.stderr
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(pid=JSON_VALUES | st.integers(min_value=-5, max_value=2**22),
       created=JSON_VALUES, status=JSON_VALUES, metrics=JSON_VALUES, step=JSON_VALUES)
def test_any_run_json_is_judged_and_shown_without_raising(
    pid: Any, created: Any, status: Any, metrics: Any, step: Any
) -> None:
    """Whatever run.json holds, in-process: never an exception, never proven (no process here
    names the run directory), a printable table row and strict JSON."""
    from distagent.commands.status import _json_ready, format_table, table_row

    run_dir = Path("/nonexistent/run")
    record = {"pid": pid, "pid_create_time": created, "status": status, "metrics": metrics,
              "last_step": step, "total_steps": step}
    assert process_mismatch(record, run_dir) is not None
    summary = {"name": "run", "status": status, "alive": False, "metrics": metrics,
               "last_step": step, "total_steps": step, "error": status}
    table = format_table([table_row(summary)])
    # Nothing left that textsafe would escape (unassigned code points are not control ones).
    assert all(terminal_text(line) == line for line in table.splitlines())
    json.loads(json.dumps(_json_ready(summary), allow_nan=False))


def test_status_calls_a_run_whose_process_here_is_gone_died(tmp_path: Path) -> None:
    """Killed on this machine: `died`. The same pid recorded on another machine proves
    nothing here: `running (dead)`, as before."""
    import socket

    killed = spawn()
    here = {"pid": killed.pid, "pid_create_time": created(killed), "host": socket.gethostname()}
    killed.kill()
    killed.wait()
    write_record(tmp_path / "here", **here)
    write_record(tmp_path / "there", **{**here, "host": "another-machine"})
    table = agent("status", str(tmp_path))
    assert table.returncode == 0, table.stderr
    shown = {line.split()[0]: line.split("  ")[1].strip() for line in
             table.stdout.splitlines()[1:]}
    assert shown == {"here": "died", "there": "running (dead)"}
    listed = {row["name"]: row["died"] for row in json.loads(agent("status", str(tmp_path),
                                                                    "--json").stdout)}
    assert listed == {"here": True, "there": False}
