"""A producer that fails inside the dashboard: the failure is shown (the status line, from the
index's ProducerError), its traceback never reaches the terminal and is kept in DISTMON_LOG when
asked; `--once` says it in one escaped line. Real app over a real watched logdir (run_test),
real CLI subprocesses; the failure is injected into the index's refresh, the one step in the
app whose exceptions are logged with a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from distcore.jobs.index import JobIndex
from distcore.producer import Loop
from distmon.logs import LOG_ENV, configure
from tests.kit.wait import until, wait_until
from tests.kit.writers import scalar_records
from tests.tui.test_live import app_over

BOOM = "BOOM \x1b[31m in compute"
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
# The CLI with JobIndex._compute failing from its `FAIL_FROM`th call on (an injected bug).
FAILING_CLI = """
import os, sys
from distcore.jobs.index import JobIndex
from distmon.cli import main
compute, calls = JobIndex._compute, [0]
def failing(self):
    calls[0] += 1
    if calls[0] >= int(os.environ["FAIL_FROM"]):
        raise ValueError("BOOM \\x1b[31m in compute")
    return compute(self)
JobIndex._compute = failing
sys.exit(main(sys.argv[1:]))
"""


def _logdir(root: Path) -> Path:
    (root / "run1").mkdir(parents=True)
    (root / "run1" / "events.out.tfevents.1.h").write_bytes(
        scalar_records("loss", [(s, 1.0 / (s + 1)) for s in range(5)]))
    return root


def _fail_after_first_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    compute, shown = JobIndex._compute, [False]

    def failing(self: JobIndex) -> Any:
        if shown[0]:
            raise ValueError(BOOM)
        snap = compute(self)
        shown[0] = bool(snap.jobs)
        return snap

    monkeypatch.setattr(JobIndex, "_compute", failing)


@pytest.mark.parametrize("log_file", [False, True])
async def test_a_failing_refresh_is_shown_never_printed_and_logged_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
    log_file: bool,
) -> None:
    log = tmp_path / "distmon.log"
    environ = {LOG_ENV: str(log)} if log_file else {}
    _fail_after_first_rows(monkeypatch)
    app = app_over(_logdir(tmp_path / "logs"))
    main = app.dashboard
    undo = configure("dashboard", sys.stderr, environ)  # as distmon.cli does before the app
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: main.jobs is not None and main.jobs.jobs, "the first rows")
            await until(pilot, lambda: main.jobs is not None and any(
                e.producer == "jobs" and "BOOM" in e.message for e in main.jobs.errors),
                "the index's error in the snapshot")
            assert main.jobs is not None
            assert [j.name for j in main.jobs.jobs] == ["run1"]  # the last rows stay
    finally:
        undo()
    err = capfd.readouterr().err
    assert "BOOM" not in err and "Traceback" not in err, err  # headless: Textual forwards stderr
    if log_file:
        text = log.read_text()
        assert "job index refresh failed" in text and "Traceback" in text and "BOOM" in text
    else:
        assert not log.exists()


def _failing_once(tmp_path: Path, fail_from: int, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", FAILING_CLI, "--once", "--no-gpu", str(_logdir(tmp_path / "l"))],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**ENV, "FAIL_FROM": str(fail_from), **env})


def test_once_says_a_failure_in_one_escaped_line(tmp_path: Path) -> None:
    done = _failing_once(tmp_path, 1)
    assert done.returncode == 1  # no snapshot at all: a crash, with its log
    lines = done.stderr.splitlines()
    assert lines[0] == ("distmon: distcore.jobs.index: job index refresh failed: ValueError: "
                        f"BOOM \\x1b[31m in compute ({LOG_ENV}=FILE keeps the traceback)")
    assert "Traceback" not in done.stderr and "\x1b" not in done.stderr
    assert lines[1].startswith("distmon: crashed (") and len(lines) == 2


def test_once_with_distmon_log_keeps_the_traceback_there(tmp_path: Path) -> None:
    log = tmp_path / "distmon.log"
    done = _failing_once(tmp_path, 1, **{LOG_ENV: str(log)})
    assert done.returncode == 1
    assert "job index refresh failed" not in done.stderr
    text = log.read_text()
    assert "job index refresh failed" in text and "Traceback" in text


def test_an_unopenable_distmon_log_is_one_line(tmp_path: Path) -> None:
    where = tmp_path / "missing" / "distmon.log"
    done = subprocess.run(
        [sys.executable, "-m", "distmon", "--once", "--no-gpu", str(_logdir(tmp_path / "l"))],
        capture_output=True, text=True, timeout=120, env={**ENV, LOG_ENV: str(where)})
    assert done.returncode == 2
    assert done.stderr == f"distmon: {LOG_ENV}={where}: cannot open (No such file or directory)\n"


def test_a_loop_without_on_error_logs_its_traceback_to_the_file_only(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "distmon.log"
    failed = threading.Event()

    def step() -> None:
        failed.set()
        raise RuntimeError("step blew up")

    undo = configure("dashboard", sys.stderr, {LOG_ENV: str(log)})
    loop = Loop("failing-step", step, interval=0.05)
    try:
        loop.start()
        wait_until(lambda: "step blew up" in (log.read_text() if log.exists() else ""),
                   "the failure in the log", 30)
    finally:
        loop.close()
        undo()
    assert "failing-step: step failed" in log.read_text() and "Traceback" in log.read_text()
    assert "step blew up" not in capfd.readouterr().err
