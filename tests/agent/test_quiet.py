"""A quiet start: TensorFlow's start-up noise is dropped, every other line reaches stderr, even
when the process dies at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distagent.quiet import LineFilter, is_noise

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


HUNG = b'distagent: worker 0: hung: worker 1: never reached the reduction; no step ended\n'
ECHO = [  # worker 0 of a real srun job, once worker 1 had left
    b"E0000 00:00:1796285382.029981    5480 ring_alg.cc:291] Aborting RingReduce with "
    b"UNAVAILABLE: Socket closed\n",
    b"Additional GRPC error information from remote target /job:worker/replica:0/task:1 while "
    b"calling /tensorflow.WorkerService/RecvBuf:\n",
    b':UNKNOWN:Error received from peer  {grpc_status:14, grpc_message:"Socket closed"}\n',
    b"E0000 00:00:1796285382.030060    5480 base_collective_executor.cc:252] BaseCollectiveExecu"
    b"tor::StartAbort UNAVAILABLE: Socket closed\n",
]


@pytest.mark.parametrize(
    ("lines", "shown"),
    [
        ([*ECHO, HUNG], [*ECHO, HUNG]),  # a peer lost before any abort: the user must see it
        ([HUNG, *ECHO], [HUNG]),  # the worker's own abort: its peers' leaving is no news
        ([HUNG, *ECHO, REAL[0], REAL[2]], [HUNG, REAL[0], REAL[2]]),  # anything else passes
        ([b"worker 0: hung: " + ECHO[0], *ECHO], [b"worker 0: hung: " + ECHO[0], *ECHO]),
        ([NOISE[3], HUNG, NOISE[0]], [HUNG]),
    ],
    ids=["lost-peer", "own-abort", "other-errors", "not-ours", "noise"],
)
def test_after_its_own_abort_a_worker_drops_the_echo_of_its_peers_leaving(
        lines: list[bytes], shown: list[bytes]) -> None:
    kept = LineFilter()
    assert [line for line in lines if kept.keep(line)] == shown


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
