"""The files run heaviest first, as tests/durations.json knows them (tests/kit/order.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit.order import DURATIONS, RECORD_ENV, known_seconds

REPO = Path(__file__).resolve().parents[2]


def collected(tmp_path: Path, seconds: dict[str, float]) -> list[str]:
    """The order pytest collects three files of two tests each in, given their seconds."""
    for name in ("test_a.py", "test_b.py", "test_c.py"):
        (tmp_path / name).write_text("def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    (tmp_path / "conftest.py").write_text(
        "from tests.kit import order\n"
        f"SECONDS = {seconds!r}\n"
        "def pytest_collection_modifyitems(items):\n"
        "    order.heaviest_first(items, SECONDS)\n")
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", str(tmp_path)], capture_output=True,
                         text=True, cwd=tmp_path, env={"PYTHONPATH": str(REPO)}, check=True)
    return [line.split("::")[0].split("/")[-1] + ":" + line.split("::")[1]
            for line in out.stdout.splitlines() if "::" in line]


@pytest.mark.parametrize(("seconds", "expected"), [
    ({}, "abc"),
    ({"test_c.py": 9.0, "test_a.py": 1.0, "test_b.py": 5.0}, "cba"),
    ({"test_b.py": 3.0}, "bac"),  # unknown files after, in the order they came
    ({"test_b.py": 2.0, "test_c.py": 2.0}, "bca"),  # a tie keeps the collection order
], ids=["none known", "all known", "one known", "a tie"])
def test_files_heaviest_first_and_each_files_tests_in_order(
        tmp_path: Path, seconds: dict[str, float], expected: str) -> None:
    order = collected(tmp_path, seconds)
    assert order == [f"test_{f}.py:test_{n}" for f in expected for n in ("one", "two")]


def test_the_recorded_file_is_read_back_and_covers_the_slow_files(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "test_x.py").write_text("import time\ndef test_x():\n    time.sleep(0.2)\n")
    out = tmp_path / "durations.json"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "t"],
                   cwd=tmp_path, check=True, capture_output=True,
                   env={"PYTHONPATH": str(REPO), RECORD_ENV: str(out),
                        "PYTEST_ADDOPTS": f"--rootdir={tmp_path} -p tests.conftest"})
    assert known_seconds(out)["t/test_x.py"] >= 0.2
    known = known_seconds(DURATIONS)
    assert known["tests/agent/test_slurm.py"] > 10, "the shipped figures name the slow files"


@pytest.mark.parametrize("text", ["", "[1, 2]", "{not json", '{"a.py": "x", "b.py": 2}'])
def test_a_bad_durations_file_orders_nothing_it_cannot_read(tmp_path: Path, text: str) -> None:
    path = tmp_path / "durations.json"
    path.write_text(text)
    assert known_seconds(path) == ({"b.py": 2.0} if "b.py" in text else {})
    assert known_seconds(tmp_path / "missing.json") == {}
