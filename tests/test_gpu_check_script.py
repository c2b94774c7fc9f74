"""bench/gpu_check.sh (run by hand on a GPU machine) parses, and without a GPU says so and fails.

The check itself needs NVIDIA GPUs and PyTorch; here only its shell and its preflight run.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "gpu_check.sh"


def test_the_script_parses() -> None:
    result = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine: run it by hand")
def test_without_a_gpu_it_fails_in_one_clear_line(tmp_path: Path) -> None:
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path)})
    assert result.returncode == 1
    assert "FAIL preflight: nvidia-smi not found" in result.stdout
    assert result.stdout.rstrip().endswith("SUMMARY: FAIL (0 of 1 passed)")
    assert (tmp_path / "gpu_check.log").is_file()
