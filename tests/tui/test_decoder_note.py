"""distmon names the event decoder it runs: `--version` says which, and where the C kernel is
missing (forced here with DISTMON_PURE=1) --once says so in one line on stderr and the
dashboard's status line carries a note."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distcore.jobs.snapshots import JobsSnapshot
from distcore.tfrecord import kernel
from distmon import view as views
from tests.core.conftest import compiled_kernel


def _distmon(*args: str, pure: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DISTMON_PURE"}
    if pure:
        env["DISTMON_PURE"] = "1"
    return subprocess.run([sys.executable, "-m", "distmon", *args], env=env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


def test_version_names_the_c_kernel() -> None:
    compiled_kernel()
    done = _distmon("--version", pure=False)
    assert done.returncode == 0
    assert done.stdout.splitlines()[1:] == ["decoder: C kernel"]


def test_version_names_the_fallback_and_how_to_leave_it() -> None:
    done = _distmon("--version", pure=True)
    assert done.returncode == 0
    assert done.stdout.splitlines()[1:] == [
        "decoder: pure Python (fallback: DISTMON_PURE is set; unset it for the C kernel)"
    ]


@pytest.mark.parametrize("pure", [False, True])
def test_once_says_once_on_stderr_that_it_runs_the_fallback(tmp_path: Path, pure: bool) -> None:
    if not pure:
        compiled_kernel()
    done = _distmon("--once", "--no-gpu", str(tmp_path), pure=pure)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "decoder" in line]
    want = ["distmon: decoder: pure Python (fallback: DISTMON_PURE is set; unset it for the C "
            "kernel)"] if pure else []  # fmt: skip
    assert notes == want
    assert "decoder" not in done.stdout


def test_the_status_line_notes_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = JobsSnapshot(generated_at=0.0, logdirs=("logs",), jobs=(), hosts=(), alerts=())
    monkeypatch.setattr(kernel, "ACTIVE", None)
    text = views.status_text(views.ViewState(), snap, ["logs"], 0, None)
    assert text.endswith(views.PURE_PYTHON_NOTE) and text.count(views.PURE_PYTHON_NOTE) == 1
    monkeypatch.setattr(kernel, "ACTIVE", compiled_kernel())
    assert views.PURE_PYTHON_NOTE not in views.status_text(views.ViewState(), snap, ["logs"], 0,
                                                           None)  # fmt: skip
