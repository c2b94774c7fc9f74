"""Crash logs are private and hold no secrets; a hostile `--storage-option` is one line, not a
crash; `--once` exits 2 when no source at all, remote ones included, could be read.

The crashes are real: `distmon` runs as a subprocess with its real argv, its report made to fail
inside (the one thing a test must plant: distmon has no known crash to trigger).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcore.errors import DistmonError
from distcore.remote.spec import MAX_OPTION_DEPTH, parse_storage_options
from distcore.safefile import write_private
from distmon.crash import redact_argv

CRASHING = (
    "import sys, distmon.once, distmon.cli\n"
    "def boom(*a, **k): raise ZeroDivisionError('a bug in the report')\n"
    "distmon.once.run_once = boom\n"
    "sys.argv[0] = 'distmon'\n"
    "sys.exit(distmon.cli.main())\n"
)
SECRETS = ("hunter2", "AKIAEXAMPLESECRET", "s3cr3t-t0ken", "p4ss")


def distmon(*args: str, env: dict[str, str], crash: bool = False) -> subprocess.CompletedProcess[
        str]:
    command = [sys.executable, "-c", CRASHING] if crash else [sys.executable, "-m", "distmon"]
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, timeout=60,
                          stdin=subprocess.DEVNULL)


def crash_env(tmp_path: Path, state: Path) -> dict[str, str]:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "XDG_STATE_HOME": str(state), "TMPDIR": str(tmp_path / "tmp")}


def logged_path(stderr: str) -> Path:
    (line,) = stderr.splitlines()
    assert line.startswith("distmon: crashed (ZeroDivisionError: a bug in the report); "), line
    return Path(line.split("traceback in ", 1)[1])


def secret_argv(tmp_path: Path) -> list[str]:
    return ["--once", "--no-gpu", "--storage-option", "secret=hunter2",
            "--storage-option=client_kwargs.aws_secret_access_key=AKIAEXAMPLESECRET",
            "--storage-option", 'token={"t": "s3cr3t-t0ken"}', str(tmp_path)]


def test_a_crash_log_is_private_and_redacted(tmp_path: Path) -> None:
    state = tmp_path / "state"
    done = distmon(*secret_argv(tmp_path), "s3://me:p4ss@bucket/x",
                   env=crash_env(tmp_path, state), crash=True)
    assert done.returncode == 1
    log = logged_path(done.stderr)
    assert log.parent == state / "distmon"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    text = log.read_text()
    assert "ZeroDivisionError: a bug in the report" in text and "secret=***" in text
    assert "s3://***@bucket/x" in text
    assert not [s for s in SECRETS if s in text + done.stderr]


def _plant(kind: str, planted: Path, elsewhere: Path) -> None:
    elsewhere.mkdir()
    if kind == "symlink":
        planted.symlink_to(elsewhere)
    elif kind == "world-writable":
        planted.mkdir()
        planted.chmod(0o777)
    else:  # another user's directory (root only can make one here)
        planted.mkdir(mode=0o755)
        os.chown(planted, 65534, 65534)


@pytest.mark.parametrize("kind", ["symlink", "world-writable", "other-owner"])
def test_a_planted_fallback_is_never_followed(tmp_path: Path, kind: str) -> None:
    if kind == "other-owner" and os.geteuid() != 0:
        pytest.skip("planting another user's directory needs root (chown)")
    env = crash_env(tmp_path, tmp_path / "a-file")
    (tmp_path / "a-file").write_text("")  # the state dir cannot be made: the fallback is used
    planted = tmp_path / "tmp" / f"distmon-{os.getuid()}"
    elsewhere = tmp_path / "attacker"
    _plant(kind, planted, elsewhere)
    done = distmon(*secret_argv(tmp_path), env=env, crash=True)
    assert done.returncode == 1
    log = logged_path(done.stderr)
    assert list(elsewhere.iterdir()) == [] and not list(planted.glob("crash-*"))
    assert log.parent.parent == tmp_path / "tmp" and log.parent.name.startswith(
        f"distmon-{os.getuid()}-")  # a fresh mkdtemp directory, 0700
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_an_existing_name_or_link_is_never_written_through(tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.write_text("keep")
    directory = tmp_path / "d"
    write_private(directory, "crash.log", b"one")
    with pytest.raises(FileExistsError):  # O_EXCL: never an existing file
        write_private(directory, "crash.log", b"two")
    (directory / "link.log").symlink_to(target)
    with pytest.raises(FileExistsError):  # O_EXCL|O_NOFOLLOW: never through a link
        write_private(directory, "link.log", b"two")
    assert target.read_text() == "keep" and (directory / "crash.log").read_bytes() == b"one"


@settings(max_examples=200, deadline=None)
@given(argv=st.lists(st.text(max_size=40), max_size=6), secret=st.sampled_from(SECRETS))
def test_redaction_never_leaks_a_secret_value(argv: list[str], secret: str) -> None:
    forms = [f"secret={secret}", f"--storage-option=key={secret}", f"s3://u:{secret}@h/x",
             f"client_kwargs.aws_secret_access_key={secret}", f'token={{"x": "{secret}"}}']
    for form in forms:
        assert secret not in repr(redact_argv([*argv, form, *argv])) or secret in repr(argv)
    assert secret not in repr(redact_argv(["--password", secret])[1:])
    hook = f"https://hooks.slack.com/services/T0/{secret}"  # a webhook's secret is its path
    assert secret not in repr(redact_argv(["--notify", hook, f"--notify={hook}"]))


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=2)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=2), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(value=st.text() | JSON.map(json.dumps) | st.integers(1, 5000).map(
    lambda d: "[" * d + "]" * d) | st.integers(1, 5000).map(lambda d: '{"a":' * d + "1" + "}" * d))
def test_any_storage_option_value_parses_or_is_one_error(value: str) -> None:
    try:
        options = parse_storage_options([f"k={value}"])
    except DistmonError as err:
        assert str(err).count("\n") == 0 and f"nested deeper than {MAX_OPTION_DEPTH}" in str(err)
    else:
        json.dumps(options)  # a plain value: printable, no recursion


@pytest.mark.parametrize("depth", [MAX_OPTION_DEPTH + 1, 900, 50_000])  # 128 KiB an argument
def test_a_deeply_nested_storage_option_is_one_line(tmp_path: Path, depth: int) -> None:
    done = distmon("--once", "--no-gpu", "--storage-option", "k=" + "[" * depth + "]" * depth,
                   "memory://nothing", env=crash_env(tmp_path, tmp_path / "state"))
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == \
        f"distmon: --storage-option k: nested deeper than {MAX_OPTION_DEPTH} levels (see --help)"
    assert not (tmp_path / "state").exists()  # no crash log: not a crash


@pytest.mark.parametrize("sources", [["memory://nothing"], ["memory://a", "memory://b/c"]])
def test_once_exits_2_when_no_remote_source_can_be_read(tmp_path: Path,
                                                        sources: list[str]) -> None:
    env = crash_env(tmp_path, tmp_path / "state")
    for extra in ([], ["--json"]):
        done = distmon("--once", "--no-gpu", *extra, *sources, env=env)
        assert done.returncode == 2, done
        assert done.stderr.splitlines() == [f"distmon: {s}: no such bucket or path"
                                            for s in sources]
    (tmp_path / "runs").mkdir()  # one readable source: the rest are errors in the report
    done = distmon("--once", "--json", "--no-gpu", str(tmp_path / "runs"), *sources, env=env)
    assert done.returncode == 0, done.stderr
    assert [e["message"] for e in json.loads(done.stdout)["errors"]] == \
        [f"{s}: no such bucket or path" for s in sources]
