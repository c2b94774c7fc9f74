"""A dashboard that dies exits non-zero, with one line on stderr naming a log file that holds
the traceback; never exit 0 after a crash."""

from __future__ import annotations

import errno
import resource
from pathlib import Path

import pytest

import distmon.app
from distmon.app import DistmonApp
from distmon.cli import out_of_files_line
from distmon.crash import CRASH_EXIT, report_crash, run_guarded, state_dirs
from distmon.dashboard import DashboardScreen
from distmon.options import Options
from distmon.producers import Producers
from tests.tui.fixed import FixedRuns


def no_producers() -> Producers:
    return Producers(FixedRuns([]))

# Textual finds CSS_PATH next to the module that defines the class: the subclasses' is here.
CSS = str(Path(distmon.app.__file__).with_name("distmon.tcss"))


def render_jobs(screen: DashboardScreen) -> None:
    raise ZeroDivisionError("\x1b]0;a bug\x07 in render_jobs")


def test_a_crash_exits_non_zero_with_a_log_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real dashboard, with a bug in its first refresh."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(DashboardScreen, "render_jobs", render_jobs)
    app = DistmonApp(Options(logdirs=(tmp_path,)), producers=lambda: Producers(FixedRuns([])))
    assert run_guarded(app, headless=True) == CRASH_EXIT
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(
        "distmon: crashed (ZeroDivisionError: \\x1b]0;a bug\\x07 in render_jobs)"
    )
    logs = list((tmp_path / "state" / "distmon").glob("crash-*.log"))
    assert len(logs) == 1 and str(logs[0]) in err
    text = logs[0].read_text()
    assert "Traceback (most recent call last)" in text and "in render_jobs" in text


def test_a_clean_quit_exits_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    class QuitAtOnce(DistmonApp):
        CSS_PATH = CSS

        def on_ready(self) -> None:
            self.exit()

    assert (
        run_guarded(QuitAtOnce(Options(logdirs=(tmp_path,)), producers=no_producers), headless=True)
        == 0
    )
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize(
    ("xdg", "first"),
    [
        ("/xdg/state", Path("/xdg/state/distmon")),
        ("relative/state", Path.home() / ".local/state/distmon"),  # invalid per the spec
        ("", Path.home() / ".local/state/distmon"),
    ],
)
def test_state_dirs_follow_xdg(xdg: str, first: Path) -> None:
    dirs = state_dirs({"XDG_STATE_HOME": xdg})
    assert dirs[0] == first and "distmon-" in dirs[1].name


def test_unwritable_state_dir_falls_back_to_a_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))  # mkdir under a file fails
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    try:
        raise ValueError("boom")
    except ValueError as err:
        assert report_crash(err) == CRASH_EXIT
    err_line = capsys.readouterr().err
    assert str(tmp_path / "tmp") in err_line and "boom" in err_line


@pytest.mark.parametrize(
    ("err", "said"),
    [
        (OSError(errno.EMFILE, "Too many open files", "/x/inotify.py"),
         "out of file descriptors: Too many open files (at this process's limit of {limit}: "
         "raise it with ulimit -n, or LimitNOFILE= in a systemd unit)"),
        (OSError(errno.ENFILE, "Too many open files in system"),
         "out of file descriptors: Too many open files in system (the system's limit, "
         "fs.file-max)"),
        (OSError(errno.ENOENT, "No such file or directory"), None),  # a bug: a crash report
        (OSError("no errno"), None),
    ],
)
def test_out_of_descriptors_is_one_line_not_a_crash(err: OSError, said: str | None) -> None:
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert out_of_files_line(err) == (said.format(limit=limit) if said else None)
