"""`make demo`: train the sample job and show what distmon reads from it.

Runs `distagent` as subprocesses, so this module never imports TensorFlow itself.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

QUICKSTART = Path("sample_configs/quickstart.toml")
DEMO_LOGDIR = Path("demo_runs")


def main() -> int:
    agent = [sys.executable, "-m", "distagent"]
    logdir = f"run.logdir={DEMO_LOGDIR}"
    subprocess.run([*agent, "plan", str(QUICKSTART), "--set", logdir], check=True)
    subprocess.run([*agent, "start", str(QUICKSTART), "--set", logdir], check=True)
    return subprocess.run([sys.executable, "-m", "distmon", "--once", str(DEMO_LOGDIR)]).returncode


if __name__ == "__main__":
    sys.exit(main())
