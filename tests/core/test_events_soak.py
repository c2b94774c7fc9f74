"""The soak (bench/soak.py) for 20 s: writers append, truncate, rewrite, replace, delete and
recreate files under a live watcher; no exception, bounded memory, and the watched state equal
to a fresh read. The 10-minute run is `bench/soak.py` (its result is in docs/benchmarks.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak.py"


@pytest.mark.slow
def test_twenty_seconds_of_file_churn_end_equal_to_a_fresh_read() -> None:
    out = subprocess.run(
        [sys.executable, str(SOAK), "--seconds", "20", "--json", "--seed", "7"],
        capture_output=True, text=True, timeout=240, env=os.environ.copy(),
    )
    assert out.returncode in (0, 1), out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["writer_failures"] == []
    assert result["watcher_errors"] == []
    assert result["differences"] == []
    assert set(result["actions"]) == {
        "append", "partial", "truncate", "rewrite", "replace", "delete", "new_file"
    }
    assert result["ok"], result
