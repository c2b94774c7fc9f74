"""The README's first contact, `pip install .`: the wheel built from this tree, installed with
its dependencies into a clean virtual environment (no TensorFlow, none of the agent's extra),
and every console script it declares run there. Each answers `--help` and `--version`; the
dashboard reads an empty logdir; a distagent command that needs the agent's extra says in one
line what to install (no traceback). Skipped where no package index answers (pip downloads
the base dependencies and the build's setuptools)."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "sample_configs" / "quickstart.toml"
# What a build must not copy: environments, caches and a kernel built here for this checkout.
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info",
                                     "__pycache__", ".*_cache", "*.so", "demo_runs")  # fmt: skip
PIP_SECONDS = 600


def _pip(python: Path | str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=PIP_SECONDS,
                          env=_clean_env(), check=False)  # fmt: skip


def _clean_env() -> dict[str, str]:
    """This session's environment without what points Python at the checkout or a venv."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "DISTMON_PURE"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def _index_reachable(tmp: Path) -> str | None:
    """None where pip can download from its index; else why not, in one line."""
    done = _pip(sys.executable, "download", "--no-deps", "--dest", str(tmp / "probe"),
                "setuptools>=77", cwd=tmp)  # fmt: skip
    lines = (done.stderr or done.stdout).strip().splitlines()
    return None if done.returncode == 0 else (lines[-1] if lines else "pip download failed")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The clean environment's bin/ and the console scripts the wheel declares."""
    tmp = tmp_path_factory.mktemp("wheel")
    why_not = _index_reachable(tmp)
    if why_not is not None:
        pytest.skip(f"no package index reachable for pip ({why_not})")
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    built = _pip(sys.executable, "wheel", "--no-deps", "-w", str(tmp / "dist"), str(source),
                 cwd=tmp)  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp / "dist").glob("distmon-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120,
                   env=_clean_env())  # fmt: skip
    done = _pip(venv / "bin" / "python", "install", str(wheel), cwd=tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    return venv / "bin", _console_scripts(wheel)


def _console_scripts(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt"))
        points = configparser.ConfigParser()
        points.read_string(archive.read(name).decode())
    return sorted(points["console_scripts"])


def _run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**_clean_env(), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_the_wheel_declares_both_front_ends(installed: tuple[Path, list[str]]) -> None:
    assert installed[1] == ["distagent", "distmon"]


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_every_console_script_answers(installed: tuple[Path, list[str]], flag: str,
                                      tmp_path: Path) -> None:  # fmt: skip
    bin_dir, scripts = installed
    for script in scripts:
        done = _run(bin_dir, script, flag, cwd=tmp_path)
        assert done.returncode == 0, f"{script} {flag}: {done.stdout}{done.stderr}"
        assert done.stdout.startswith(f"{script} 0." if flag == "--version" else "usage: ")
        assert "Traceback" not in done.stderr


def test_the_dashboard_reads_a_logdir(installed: tuple[Path, list[str]], tmp_path: Path) -> None:
    done = _run(installed[0], "distmon", "--once", "--no-gpu", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


@pytest.mark.parametrize("command", [["plan", str(QUICKSTART)], ["start", str(QUICKSTART)],
                                     ["bench-input", str(QUICKSTART)]])  # fmt: skip
def test_an_agent_command_without_the_extra_says_what_to_install(
    installed: tuple[Path, list[str]], command: list[str], tmp_path: Path
) -> None:
    done = _run(installed[0], "distagent", *command, cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"distagent: {command[0]} needs ")
    assert line.endswith("pip install 'distmon[agent]' (or '.[agent]' in a checkout)")


def test_the_agent_commands_that_need_no_extra_run(installed: tuple[Path, list[str]],
                                                   tmp_path: Path) -> None:  # fmt: skip
    done = _run(installed[0], "distagent", "status", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
