"""Fixtures of the agent's tests that start real worker processes."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator

import pytest

from tests.kit.slurm import slurm  # noqa: F401 (the kit's Slurm cluster fixture, for agent tests)


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Worker processes a test starts: killed at its end, woken first if it stopped one."""
    made: list[subprocess.Popen[bytes]] = []
    yield made
    for proc in made:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()
