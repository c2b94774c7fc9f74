"""End to end: `distmon` in a real terminal (tmux) on a logdir that a tensorboardX writer is
filling; the newest step must appear on the screen, read back with `tmux capture-pane`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit.wait import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None,
                       reason="tmux is not installed (apt-get install tmux; .ci/run does)"),
]

WRITER = """
import sys
from tensorboardX import SummaryWriter
# flush() does not wait for tensorboardX's queue thread; flush_secs=1 makes that thread flush
# what it wrote within a second, as a live training job's writer does.
writer = SummaryWriter(sys.argv[1], flush_secs=1)
for line in sys.stdin:
    step = int(line)
    writer.add_scalar("loss", 1.0 / (step + 1), step)
    writer.add_scalar("accuracy", step / (step + 1), step)
    writer.flush()
    print("ok", step, flush=True)
writer.close()
"""


class Tmux:
    def __init__(self, socket: str) -> None:
        self.base = ["tmux", "-L", socket]

    def __call__(self, *args: str) -> str:
        done = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=10)
        return done.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "distmon")

    def wait_for(self, text: str, timeout: float = 90.0) -> str:
        def shown() -> str:
            screen = self.screen()
            return screen if text in screen else ""

        return wait_until(shown, f"{text!r} on screen", timeout, every=0.2, detail=self.screen)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    mux = Tmux(f"distmon-test-{os.getpid()}")
    yield mux
    mux("kill-server")


def write(writer: subprocess.Popen[str], step: int) -> None:
    assert writer.stdin is not None and writer.stdout is not None
    writer.stdin.write(f"{step}\n")
    writer.stdin.flush()
    assert writer.stdout.readline().split() == ["ok", str(step)]


def test_newest_step_appears_on_screen(tmp_path: Path, tmux: Tmux) -> None:
    logdir = tmp_path / "logs"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(logdir / "exp1")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        for step in range(5):
            write(writer, step)
        distmon = f"{sys.executable} -m distmon --no-gpu --refresh 0.5 {logdir}"
        tmux("new-session", "-d", "-s", "distmon", "-x", "100", "-y", "30", distmon)
        tmux.wait_for("exp1")
        tmux.wait_for("no GPU")  # no NVML here or not asked for: the reason, not a crash
        write(writer, 4321)
        screen = tmux.wait_for("4321")
        row = next(line for line in screen.splitlines() if "exp1" in line and "4321" in line)
        assert "0.0002314" in row  # the loss written at that step: 1 / 4322
        tmux("send-keys", "-t", "distmon", "q")
        wait_until(lambda: "distmon" not in tmux("list-sessions"), "the session's end", every=0.2)
        assert "distmon" not in tmux("list-sessions")  # q quit the app and ended the session
    finally:
        writer.kill()
        writer.wait()
