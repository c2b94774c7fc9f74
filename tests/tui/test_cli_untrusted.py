"""The `distmon` command where its exit status and terminal output are the contract: real
subprocesses, real pipes, real permissions, hostile names on disk."""

from __future__ import annotations

import json
import math
import os
import pty
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from distmon.cli import BROKEN_PIPE_EXIT
from tests.untrusted import HOSTILE_NAMES, Point, control_characters, dir_name, write_run

TIMEOUT = 120


def distmon(
    *args: str | Path, env: dict[str, str] | None = None, prefix: Sequence[str] = ()
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "distmon", *map(str, args)],
        capture_output=True,
        timeout=TIMEOUT,
        env={**os.environ, **(env or {})},
    )


def one_line_error(done: subprocess.CompletedProcess[bytes], code: int = 2) -> str:
    err = done.stderr.decode()
    assert done.returncode == code, (done.returncode, err)
    assert err.count("\n") == 1 and err.startswith("distmon: "), err
    assert "Traceback" not in err and not done.stdout
    return err


@pytest.fixture
def hostile_logdir(tmp_path: Path) -> Path:
    """Runs whose directory and tag names are every hostile name, with extreme numbers."""
    root = tmp_path / "logs"
    for i, name in enumerate(HOSTILE_NAMES):
        values = [1.0, math.nan, 1e300, -math.inf, 0.5]
        points = [
            Point(name, step, value, wall, "simple")
            for step, value, wall in zip(
                [0, 2**63 - 1, -(2**63), 5, 6],
                values,
                [math.nan, 1e300, math.inf, 0.0, 1.0],
                strict=True,
            )
        ]
        write_run(Path(os.fsdecode(bytes(root) + b"/" + dir_name(name) + b"%d" % i)), points)
    return root


@pytest.mark.parametrize(
    "value", ["nan", "NaN", "0", "-1", "inf", "-inf", "1e400", "0.05", "3601", "abc", ""]
)
def test_refresh_outside_its_range_is_one_line_exit_2(tmp_path: Path, value: str) -> None:
    err = one_line_error(distmon(f"--refresh={value}", tmp_path))
    assert "--refresh" in err and "0.1 to 3,600" in err


@pytest.mark.parametrize(
    "args",
    [
        ["--simulate-gpus", "1000000000"],
        ["--simulate-gpus", "-1"],
        ["--max-points", "1"],
        ["--max-points", "10000000000"],
        ["--json"],  # needs --once
        ["--no-such-flag"],
    ],
)
def test_bad_flags_are_one_line_exit_2(tmp_path: Path, args: list[str]) -> None:
    one_line_error(distmon(*args, tmp_path))


@pytest.mark.parametrize("value", ["0.1", "3600", "2.5"])
def test_refresh_inside_its_range_is_accepted(tmp_path: Path, value: str) -> None:
    done = distmon("--refresh", value, "--once", "--no-gpu", tmp_path)
    assert done.returncode == 0, done.stderr


def test_missing_logdir_and_file_logdir_are_one_line(tmp_path: Path) -> None:
    assert "no such log directory" in one_line_error(distmon(tmp_path / "nope"))
    (tmp_path / "file").write_text("x")
    assert "not a directory" in one_line_error(distmon("--once", tmp_path / "file"))


def _without_root_privileges() -> list[str]:
    """As root, permissions do not apply: drop the capabilities that bypass them."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot make a directory unreadable "
                    "(apt-get install util-linux, or run as a non-root user)")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


@pytest.mark.parametrize("once", [True, False])
def test_unreadable_logdir_is_one_line_exit_2(tmp_path: Path, once: bool) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        flags = ["--once"] if once else []
        done = distmon(*flags, locked, prefix=_without_root_privileges())
        assert "cannot read log directory (Permission denied)" in one_line_error(done)
    finally:
        locked.chmod(0o700)


def test_without_a_terminal_distmon_prints_the_report(hostile_logdir: Path) -> None:
    """stdout is a pipe here: the report, not the dashboard's escape codes."""
    done = distmon("--no-gpu", hostile_logdir)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert f"{len(HOSTILE_NAMES)} runs in" in out
    assert not control_characters(out)
    assert "not a terminal" in distmon("--help").stdout.decode()


def test_stderr_not_a_terminal_also_gives_the_report(tmp_path: Path) -> None:
    """The dashboard draws on stderr: `distmon 2>log` in a terminal must not fill the log with
    escape codes (and show nothing)."""
    main, secondary = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "distmon", "--no-gpu", str(tmp_path)],
            stdout=secondary,
            stderr=subprocess.PIPE,
            timeout=TIMEOUT,
        )
        os.close(secondary)
        out = _read_all(main)
    finally:
        os.close(main)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    assert b"0 runs in" in out and b"\x1b[" not in out


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_once_text_escapes_every_name(hostile_logdir: Path) -> None:
    done = distmon("--once", "--no-gpu", hostile_logdir)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert not control_characters(out), control_characters(out)[:5]
    assert "\\x1b]0;pwned\\x07" in out and "\\u202e" in out and "\\xff\\xfe" in out
    assert max(len(line) for line in out.splitlines()) < 600  # 10,000-character names elided


def test_once_json_is_valid_strict_utf8(hostile_logdir: Path) -> None:
    done = distmon("--once", "--json", "--no-gpu", hostile_logdir)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout.decode("utf-8"), parse_constant=_no_constants)
    names = {run["name"] for run in doc["runs"]}
    assert len(names) == len(HOSTILE_NAMES)
    assert any(name.startswith("\\xff\\xfe") for name in names)  # undecodable bytes as \xNN
    assert any(name.startswith("\x1b]0;pwned\x07") for name in names)  # JSON escapes it itself


def _no_constants(name: str) -> float:
    raise AssertionError(f"JSON must not contain {name}")


@pytest.mark.parametrize(
    "env",
    [
        {"PYTHONIOENCODING": "ascii:strict"},
        {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},
        {"PYTHONIOENCODING": "latin-1:strict"},
    ],
    ids=["ascii-strict", "C-locale", "latin-1"],
)
@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["text", "json"])
def test_strict_or_non_utf8_stdout_never_raises(
    hostile_logdir: Path, env: dict[str, str], json_flag: list[str]
) -> None:
    done = distmon("--once", *json_flag, "--simulate-gpus", "1", hostile_logdir, env=env)
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr
    if json_flag:
        json.loads(done.stdout)


@pytest.mark.parametrize(
    "args",
    [
        ["--once"],
        ["--once", "--json"],
        [],  # not a terminal: the report
        ["--help"],
        ["--version"],
    ],
)
def test_closed_pipe_ends_quietly(hostile_logdir: Path, args: list[str]) -> None:
    """`distmon ... | head` once head has gone: no BrokenPipeError, nothing on stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before distmon writes anything
    try:
        done = subprocess.run(
            [sys.executable, "-m", "distmon", "--no-gpu", *args, str(hostile_logdir)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=TIMEOUT,
        )
    finally:
        os.close(write_end)
    assert done.stderr == b""
    # argparse's --help and --version swallow the error themselves: quiet, exit 0.
    assert done.returncode == (0 if args in (["--help"], ["--version"]) else BROKEN_PIPE_EXIT)


def test_pipe_closed_midway_through_a_long_report(tmp_path: Path) -> None:
    """`distmon --once | head -1` on a report far longer than the pipe's buffer."""
    tags = [b"tag/%05d" % i for i in range(3000)]
    write_run(tmp_path / "run", [Point(tag, 1, 1.0, 1.0) for tag in tags])
    with subprocess.Popen(
        [sys.executable, "-m", "distmon", "--once", "--no-gpu", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith(b"1 run in")
        proc.stdout.close()
        err = proc.stderr.read()
        code = proc.wait(TIMEOUT)
    assert err == b"" and code == BROKEN_PIPE_EXIT


def test_error_lines_escape_the_path_they_quote(tmp_path: Path) -> None:
    hostile = tmp_path / "\x1b]0;pwned\x07" / "missing"
    err = one_line_error(distmon(hostile))
    assert "\\x1b]0;pwned\\x07" in err and not control_characters(err.rstrip("\n"))
