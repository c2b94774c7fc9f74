"""Which ssh runs: `distmon --once host:PATH` as a real process whose working directory holds a
planted `ssh`, under a PATH with an empty element, then one with no absolute element at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distcore.process import find_command
from tests.kit.net import free_port

ROOT = Path(__file__).resolve().parents[2]
SSH = find_command("ssh")


def planted(cwd: Path) -> Path:
    """A `./ssh` that, if it ever ran, would leave a mark and pose as a connected host."""
    mark = cwd / "PLANTED-SSH-RAN"
    fake = cwd / "ssh"
    fake.write_text(f"#!/bin/sh\ntouch '{mark}'\necho distmon-ready\nexec /bin/sh\n")
    fake.chmod(0o755)
    return mark


def once_over_ssh(cwd: Path, path: str) -> subprocess.CompletedProcess[str]:
    """`distmon --once refused:/x`, where `refused` is a loopback port nothing listens on."""
    (cwd / "ssh_config").write_text(f"Host refused\n  HostName 127.0.0.1\n  Port {free_port()}\n"
                                    "  StrictHostKeyChecking no\n")  # fmt: skip
    env = {"PATH": path, "HOME": str(cwd), "PYTHONPATH": os.pathsep.join(
        str(ROOT / p) for p in ("shared", "agent", "tui"))}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "distmon", "--once", "--no-gpu", "--ssh-config", "ssh_config",
         "refused:/x"], cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.skipif(SSH is None or os.path.dirname(SSH) != "/usr/bin", reason="no /usr/bin/ssh")
def test_an_empty_path_element_never_runs_a_planted_ssh(tmp_path: Path) -> None:
    mark = planted(tmp_path)
    done = once_over_ssh(tmp_path, ":/usr/bin")
    assert not mark.exists()
    # The real client ran: its own reason, in one line.
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Connection refused" in done.stderr, done.stderr


def test_no_absolute_path_element_is_one_line_naming_the_missing_client(tmp_path: Path) -> None:
    mark = planted(tmp_path)
    done = once_over_ssh(tmp_path, "bin:.:")
    assert not mark.exists()
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.endswith(
        "(no ssh on PATH's absolute directories: install OpenSSH's client)\n"), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("name", "found"),
    [("/bin/sh", "/bin/sh"), ("bin/ssh", None), ("./ssh", None), ("/no/such/ssh", None)],
)
def test_a_name_with_a_directory_is_taken_only_when_absolute(
    name: str, found: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bin").mkdir()
    for fake in (tmp_path / "bin" / "ssh", tmp_path / "ssh"):
        fake.write_text("#!/bin/sh\n")
        fake.chmod(0o755)
    assert find_command(name) == found
