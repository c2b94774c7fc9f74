"""A quiet start: TensorFlow's start-up noise is dropped, every other line reaches stderr, even
when the process dies at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distagent.quiet import is_noise

QUICKSTART = Path(__file__).resolve().parents[2] / "sample_configs" / "quickstart.toml"
NOISE = [
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
    b"I0000 00:00:1796027017.030502    6056 port.cc:153] oneDNN custom operations are on.\n",
    b"I0000 00:00:1796027017.030822    6056 cudart_stub.cc:31] Could not find cuda drivers on "
    b"your machine, GPU will not be used.\n",
    b"E0000 00:00:1796027019.047794    6056 cuda_platform.cc:52] failed call to cuInit: INTERNAL:"
    b" CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\n",
]
REAL = [
    b"E0000 00:00:1796027019.047794    6056 some_op.cc:52] INTERNAL: out of memory\n",
    b"W0000 00:00:1796027019.047794    6056 cache_dataset_ops.cc:912] The calling iterator\n",
    b"Traceback (most recent call last):\n",
    b"distagent: sample.toml: train.epochs: expected an integer > 0, got 0\n",
    b"I0000 looks like a log line but is not one\n",
]


@pytest.mark.parametrize("line", NOISE)
def test_noise_is_recognised(line: bytes) -> None:
    assert is_noise(line)


@pytest.mark.parametrize("line", REAL)
def test_everything_else_passes(line: bytes) -> None:
    assert not is_noise(line)


WRITER = """
import os, sys
from distagent.quiet import QuietStderr
quiet = QuietStderr().start()
for line in {lines!r}:
    os.write(2, line)
print("python's own stderr", file=sys.stderr)
{end}
"""


@pytest.mark.parametrize("end", ["quiet.close()", "sys.stderr.flush(); os.abort()"],
                         ids=["exit", "abort"])
def test_the_filter_drops_noise_and_forwards_the_rest(end: str) -> None:
    code = WRITER.format(lines=[*NOISE, *REAL], end=end)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    lines = done.stderr.splitlines(keepends=True)
    assert lines == [*REAL, b"python's own stderr\n"]


def test_a_real_command_starts_quietly_and_verbose_is_accepted_anywhere() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    plan = [sys.executable, "-m", "distagent", "plan", str(QUICKSTART)]
    quiet = subprocess.run(plan, capture_output=True, text=True, env=env, timeout=120)
    assert quiet.returncode == 0 and "learning rate" in quiet.stdout
    assert quiet.stderr == ""
    for command in ([*plan, "--verbose"], [*plan[:3], "--verbose", *plan[3:]]):
        loud = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        assert loud.returncode == 0 and "learning rate" in loud.stdout


def test_start_which_re_executes_itself_stays_quiet(tmp_path: Path) -> None:
    """`start` re-executes itself once (to carry its run directory in its environment); the
    re-executed program keeps the filter it inherited instead of stacking a second one."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run(
        [sys.executable, "-m", "distagent", "start", str(QUICKSTART), "--set",
         f"run.logdir={tmp_path}", "--set", "train.epochs=1", "--set", "train.steps_per_epoch=4",
         "--set", "data.synthetic.num_examples=512"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "finished at step 4/4" in done.stdout
    assert done.stderr == ""
