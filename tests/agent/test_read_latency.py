"""`data.read_latency_ms`: storage latency for any source, as a network filesystem or a bucket adds.

The wait costs no CPU and keeps every example in its place; the naive pipeline pays it once per
example, one after the other; a job stopped while reads are in flight saves and exits (a sleep
in a `py_function` deadlocked the iterator's teardown: the job hung until it was killed). How
much the parallel reads hide is measured in `bench/pipeline.py`, not here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distagent.config import config_from_dict
from distagent.data import open_source
from distagent.schema import JobConfig
from distcore import names

LATENCY_MS = 5.0
QUICKSTART = Path(__file__).resolve().parents[2] / "sample_configs" / "quickstart.toml"


def _cfg(*overrides: str) -> JobConfig:
    base = ("data.synthetic.num_examples=48", "data.synthetic.input_shape=[4]")
    return config_from_dict({}, overrides=base + overrides)


def _read_all(tf: Any, cfg: JobConfig, parallel: Any) -> tuple[list[Any], float, float]:
    """(features of every example in read order, wall seconds, CPU seconds of this process)."""
    ds = open_source(cfg).read(parallel)
    wall, cpu = time.perf_counter(), time.process_time()
    features = [x.numpy() for x, _ in ds]
    return features, time.perf_counter() - wall, time.process_time() - cpu


@pytest.mark.parametrize("parallel", ["autotune", 1])
def test_latency_keeps_every_example_in_its_place(tf: Any, parallel: Any) -> None:
    calls = tf.data.AUTOTUNE if parallel == "autotune" else 1
    plain, _, _ = _read_all(tf, _cfg(), calls)
    slow, _, _ = _read_all(tf, _cfg(f"data.read_latency_ms={LATENCY_MS}"), calls)
    assert len(slow) == len(plain) == 48
    assert all(np.array_equal(a, b) for a, b in zip(plain, slow, strict=True))


def test_the_naive_read_waits_for_every_example_without_spending_cpu(tf: Any) -> None:
    cfg = _cfg(f"data.read_latency_ms={LATENCY_MS}")
    # The same read without latency first: TensorFlow's one-off costs (tracing, its thread
    # pools) land there, so what is compared below is what the latency itself costs.
    _, _, plain_cpu = _read_all(tf, _cfg(), 1)
    _, wall, cpu = _read_all(tf, cfg, 1)
    waited = 48 * LATENCY_MS / 1000.0
    assert wall >= waited  # a sleep never ends early, however idle or busy the machine
    # Waiting, not computing: nothing for free cores to speed up.
    assert cpu - plain_cpu < waited / 2
    assert open_source(cfg).read_latency_ms == LATENCY_MS


def test_the_latency_adds_to_a_sources_own(tf: Any) -> None:
    both = _cfg("data.read_latency_ms=1.5", "data.synthetic.read_latency_ms=2")
    assert open_source(both).read_latency_ms == 3.5


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "20000"])
def test_bad_latencies_name_the_key(value: str) -> None:
    from distcore.errors import DistmonError

    with pytest.raises(DistmonError, match=r"data\.read_latency_ms"):
        _cfg(f"data.read_latency_ms={value}")


@pytest.mark.slow
def test_a_naive_job_waiting_on_storage_stops_on_sigterm(tmp_path: Path) -> None:
    settings = {"run.logdir": tmp_path, "run.name": "slow", "strategy.cpu_replicas": 2,
                "data.optimize": "false", "data.read_latency_ms": LATENCY_MS,
                "data.validation_fraction": 0.0, "train.epochs": 50, "train.log_every_steps": 2,
                # The default buffer (all 8,192 examples) fills one 5 ms read at a time before
                # the first step: 41 s of the test's 55 on a quiet machine, spent before the
                # reads it is about are in flight.
                "data.shuffle_buffer": 64}
    command = [sys.executable, "-m", "distagent", "start", str(QUICKSTART)]
    for key, value in settings.items():
        command += ["--set", f"{key}={value}"]
    job = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True,
                           env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    try:
        assert job.stdout is not None
        for line in job.stdout:  # a logged step: reads are in flight from here on
            if line.startswith("step "):
                break
        job.send_signal(signal.SIGTERM)
        out, _ = job.communicate(timeout=120)  # bounds a failure only (a hang was forever)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 0, out
    record = json.loads((tmp_path / "slow" / "run.json").read_text())
    assert record["status"] == names.STATUS_STOPPED
