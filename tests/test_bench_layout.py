"""`make bench` runs the benchmarks in bench/ and only those: the modules they share are named
with a leading underscore (bench/_installed.py) and the Makefile's loop skips them. Checked
through make itself, its venv's python replaced by one that records what it was asked to run."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
MAIN = 'if __name__ == "__main__":'


def is_benchmark(script: Path) -> bool:
    return MAIN in script.read_text()


@pytest.mark.skipif(shutil.which("make") is None, reason="apt-get install make: runs the Makefile")
def test_make_bench_runs_every_benchmark_and_no_helper(tmp_path: Path) -> None:
    venv, log = tmp_path / "venv", tmp_path / "ran"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text('#!/bin/sh\necho "$1" >> "$RAN"\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    (venv / ".installed").touch()  # newer than pyproject.toml: make installs nothing
    subprocess.run(
        ["make", "-s", "-C", str(REPO), "bench", f"VENV={venv}"],
        check=True, capture_output=True, env={**os.environ, "RAN": str(log)}, timeout=60,
    )  # fmt: skip
    ran = sorted(log.read_text().split())  # (the shell's glob sorts by the locale)
    every = sorted(p.relative_to(REPO).as_posix() for p in BENCH.glob("*.py"))
    assert ran == [p for p in every if not Path(p).name.startswith("_")]
    assert "bench/_installed.py" in every and "bench/_installed.py" not in ran
    for script in every:  # what runs is a benchmark; what is skipped is none
        assert is_benchmark(REPO / script) == (script in ran), script


@pytest.mark.parametrize(
    "script",
    sorted(p.name for p in BENCH.glob("[!_]*.py") if "import _installed" in p.read_text()),
)
def test_the_benchmarks_find_their_shared_helper(script: str) -> None:
    """Each benchmark that imports bench/_installed.py starts (its --help) from any directory."""
    done = subprocess.run([sys.executable, str(BENCH / script), "--help"], cwd="/",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def test_make_type_checks_bench_as_the_rest() -> None:
    """`make test` and `make typecheck` run mypy over the same folders, bench/ among them:
    every folder ruff checks, the tests too."""
    recipes = [line.split() for line in (REPO / "Makefile").read_text().splitlines()]
    mypy = [r[1:] for r in recipes if r and r[0] == "$(BIN)/mypy"]
    ruff = [r[2:] for r in recipes if r[:2] == ["$(BIN)/ruff", "check"]]
    assert len(mypy) == 2 and mypy[0] == mypy[1]  # test, typecheck
    assert "bench" in mypy[0]
    assert all(set(r) == set(mypy[0]) for r in ruff) and ruff
