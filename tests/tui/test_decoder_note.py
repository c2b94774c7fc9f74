"""distmon names the event decoder it runs, through one function (distmon.decoder_note) for
every front end a person reads: `--version` says which, and where the C kernel is missing
(forced here with DISTMON_PURE=1) the dashboard's help and `--serve`'s log say so too. Nothing
else does: --once's stderr and the status line stay as scripts, pipes and snapshots read them
on a machine without a C compiler."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distcore.jobs.snapshots import JobsSnapshot
from distcore.tfrecord import kernel
from distmon import view as views
from distmon.decoder_note import decoder_help, decoder_line
from tests.core.conftest import compiled_kernel
from tests.tui.test_serve import Serve

FALLBACK = "decoder: pure Python (fallback: DISTMON_PURE is set; unset it for the C kernel)"


def _environ(pure: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DISTMON_PURE"}
    if pure:
        env["DISTMON_PURE"] = "1"
    return env


def _distmon(*args: str, pure: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distmon", *args], env=_environ(pure),
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_version_names_the_c_kernel() -> None:
    compiled_kernel()
    done = _distmon("--version", pure=False)
    assert done.returncode == 0
    assert done.stdout.splitlines()[1:] == ["decoder: C kernel"]


def test_version_names_the_fallback_and_how_to_leave_it() -> None:
    done = _distmon("--version", pure=True)
    assert done.returncode == 0
    assert done.stdout.splitlines()[1:] == [FALLBACK]


@pytest.mark.parametrize("pure", [False, True])
def test_once_stderr_is_the_same_on_either_decoder(tmp_path: Path, pure: bool) -> None:
    if not pure:
        compiled_kernel()
    done = _distmon("--once", "--no-gpu", str(tmp_path), pure=pure)
    assert done.returncode == 0, done.stderr
    assert "decoder" not in done.stderr and "decoder" not in done.stdout


def test_the_status_line_never_notes_the_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = JobsSnapshot(generated_at=0.0, logdirs=("logs",), jobs=(), hosts=(), alerts=())
    monkeypatch.setattr(kernel, "ACTIVE", None)
    assert "decoder" not in views.status_text(views.ViewState(), snap, ["logs"], 0, None)


def test_the_runs_help_names_the_fallback_and_how_to_leave_it() -> None:
    """In a process on the fallback the runs table's help (the `?` panel) ends with it."""
    code = "from distmon.widgets.runs import RunsTable; print(RunsTable.HELP)"
    env = {**os.environ, "DISTMON_PURE": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert done.stdout.rstrip().splitlines()[-1] == (
        "The decoder: pure Python (fallback: DISTMON_PURE is set; unset it for the C kernel)."
    )
    assert "● live" in done.stdout


def test_the_runs_help_is_silent_on_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel, "ACTIVE", compiled_kernel())
    assert decoder_help() == ""


def test_one_line_for_every_front_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel is named only where asked (`--version`); the fallback wherever a person reads."""
    monkeypatch.setattr(kernel, "ACTIVE", compiled_kernel())
    assert (decoder_line(), decoder_line(always=True)) == (None, "decoder: C kernel")
    monkeypatch.setattr(kernel, "ACTIVE", None)
    monkeypatch.setenv("DISTMON_PURE", "1")
    assert decoder_line() == decoder_line(always=True) == FALLBACK
    assert decoder_help() == f"\nThe {FALLBACK}.\n"


@pytest.mark.parametrize("pure", [False, True])
def test_serve_names_the_fallback_in_its_log_and_is_silent_on_the_kernel(
    tmp_path: Path, pure: bool
) -> None:
    if not pure:
        compiled_kernel()
    logs = tmp_path / "logs"
    logs.mkdir()
    serve = Serve(tmp_path, ["--metrics", "0", "--no-gpu", str(logs)], env=_environ(pure))
    try:
        serve.port()
    finally:
        assert serve.stop() == 0, serve.stderr()
    said = [line for line in serve.stderr().splitlines() if "decoder" in line]
    assert said == ([f"distmon: {FALLBACK}"] if pure else [])
