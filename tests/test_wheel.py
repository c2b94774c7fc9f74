"""The README's first contact, `pip install .`: the wheel `make wheel` builds from this tree
(the decoder's C kernel compiled in where a C compiler is, else a pure-Python wheel that says
so: this machine's kind only, one build), installed with its dependencies into a clean virtual
environment (no TensorFlow, none of the agent's extra), and every console script it declares
run there. Each answers `--help` and `--version`, and distmon's `--version` names the decoder
the wheel carries; the dashboard reads an empty logdir; a distagent command that needs the
agent's extra says in one line what to install (no traceback). The clean environment is what
makes the last check honest (this checkout's has TensorFlow): one build and one install per
session. Skipped where no package index answers (pip downloads the base dependencies and the
build's setuptools)."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "sample_configs" / "quickstart.toml"
# What a build must not copy: environments, caches and a kernel built here for this checkout.
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info",
                                     "__pycache__", ".*_cache", "*.so", "demo_runs")  # fmt: skip
PIP_SECONDS = 600
PURE_DECODER = "decoder: pure Python (fallback: no compiled kernel; "


class Installed(NamedTuple):
    bin_dir: Path  # the clean environment's
    scripts: list[str]  # the console scripts the wheel declares
    wheel: Path
    said: str  # what `make wheel` printed


def _make_wheel(source: Path, dist: Path) -> tuple[Path, str]:
    """`make wheel` in the source tree with this interpreter: the wheel, and what it said."""
    done = subprocess.run(["make", "-s", "wheel", f"PYTHON={sys.executable}", f"DIST={dist}"],
                          cwd=source, capture_output=True, text=True, timeout=PIP_SECONDS,
                          env=_clean_env(), check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = dist.glob("distmon-*.whl")
    return wheel, done.stdout


def _kernel_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return [n for n in archive.namelist() if n.startswith("distcore/tfrecord/_kernel")]


def _compiler_here() -> bool:
    """What `make wheel` looks for: a C compiler (cc) and this Python's headers."""
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return shutil.which("cc") is not None and headers.is_file()


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
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel `make wheel` builds from a copy of this tree's sources (it writes build/ and
    dist/ there), installed with its dependencies into a clean environment."""
    tmp = tmp_path_factory.mktemp("wheel")
    why_not = _index_reachable(tmp)
    if why_not is not None:
        pytest.skip(f"no package index reachable for pip ({why_not})")
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    wheel, said = _make_wheel(source, tmp / "dist")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120,
                   env=_clean_env())  # fmt: skip
    done = _pip(venv / "bin" / "python", "install", str(wheel), cwd=tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    return Installed(venv / "bin", _console_scripts(wheel), wheel, said)


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


def test_the_wheel_declares_both_front_ends(installed: Installed) -> None:
    assert installed.scripts == ["distagent", "distmon"]


def test_make_wheel_compiles_the_kernel_in_where_a_compiler_is(installed: Installed) -> None:
    if _compiler_here():
        assert installed.said.startswith("wheel: with the decoder's C kernel"), installed.said
        assert "-cp311-abi3-" in installed.wheel.name
        assert _kernel_files(installed.wheel)
    else:
        assert "a pure-Python wheel" in installed.said, installed.said
        assert not _kernel_files(installed.wheel)


def test_distmon_names_the_decoder_the_wheel_carries(installed: Installed, tmp_path: Path) -> None:
    done = _run(installed.bin_dir, "distmon", "--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    decoder = done.stdout.splitlines()[1]
    if _kernel_files(installed.wheel):
        assert decoder == "decoder: C kernel"
    else:
        assert decoder.startswith(PURE_DECODER), decoder


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_every_console_script_answers(installed: Installed, flag: str,
                                      tmp_path: Path) -> None:  # fmt: skip
    bin_dir, scripts = installed.bin_dir, installed.scripts
    for script in scripts:
        done = _run(bin_dir, script, flag, cwd=tmp_path)
        assert done.returncode == 0, f"{script} {flag}: {done.stdout}{done.stderr}"
        assert done.stdout.startswith(f"{script} 0." if flag == "--version" else "usage: ")
        assert "Traceback" not in done.stderr


def test_the_dashboard_reads_a_logdir(installed: Installed, tmp_path: Path) -> None:
    done = _run(installed.bin_dir, "distmon", "--once", "--no-gpu", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


@pytest.mark.parametrize("command", [["plan", str(QUICKSTART)], ["start", str(QUICKSTART)],
                                     ["bench-input", str(QUICKSTART)]])  # fmt: skip
def test_an_agent_command_without_the_extra_says_what_to_install(
    installed: Installed, command: list[str], tmp_path: Path
) -> None:
    done = _run(installed.bin_dir, "distagent", *command, cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"distagent: {command[0]} needs ")
    assert line.endswith("pip install 'distmon[agent]' (or '.[agent]' in a checkout)")


def test_the_agent_commands_that_need_no_extra_run(installed: Installed,
                                                   tmp_path: Path) -> None:  # fmt: skip
    done = _run(installed.bin_dir, "distagent", "status", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
