"""`plan` refuses what `start` would (a Keras application on too small an input, a user builder
that takes none of the documented forms), in one line; a refused `start` leaves no run
directory that would list as a live job; `bench/telemetry.py --help` prints help instead of
running the benchmark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distagent.models import BUILDER_FORMS, build_model
from distcore.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "sample_configs" / "quickstart.toml"
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
BUILDERS = '''
import keras

def good(input_shape, num_classes):
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Flatten()(inputs)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))

def keyword_only(*, input_shape, num_classes):
    raise AssertionError("never called")
'''


def agent(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distagent", *args], capture_output=True,
                          text=True, env=ENV, timeout=timeout, cwd=cwd, stdin=subprocess.DEVNULL)


def sets(logdir: Path, *extra: str) -> list[str]:
    values = [f"run.logdir={logdir}", "run.name=tiny", "strategy.cpu_replicas=1",
              "data.synthetic.num_examples=64", "data.validation_fraction=0.0",
              "train.epochs=1", *extra]
    return [a for v in values for a in ("--set", v)]


@pytest.fixture
def builders(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "mymodels.py").write_text(BUILDERS)
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    sys.modules.pop("mymodels", None)


def test_a_builder_that_takes_no_documented_form_is_one_line(tf: Any, builders: Path) -> None:
    with pytest.raises(ConfigError) as err:
        build_model("mymodels:keyword_only", (8,), 2)
    message = str(err.value)
    assert "\n" not in message and "mymodels:keyword_only must take" in message
    assert BUILDER_FORMS in message


def test_a_builder_with_the_documented_signature_is_accepted(tf: Any, builders: Path) -> None:
    assert build_model("mymodels:good", (8,), 2).output.shape[-1] == 2


@pytest.mark.slow
def test_plan_refuses_too_small_an_input_and_start_leaves_nothing(tmp_path: Path) -> None:
    small = sets(tmp_path / "logs", "model.name=MobileNetV2",
                 "data.synthetic.input_shape=[16,16,3]")
    planned = agent("plan", str(QUICKSTART), *small, cwd=tmp_path)
    assert planned.returncode == 2, planned.stderr
    (line,) = planned.stderr.splitlines()
    assert line.startswith("distagent: ") and "model.name" in line
    assert "MobileNetV2 cannot take input shape [16, 16, 3]" in line

    started = agent("start", str(QUICKSTART), *small, cwd=tmp_path)
    assert started.returncode == 2, started.stderr[-2000:]
    assert "MobileNetV2 cannot take input shape [16, 16, 3]" in started.stderr.splitlines()[-1]
    assert not (tmp_path / "logs" / "tiny").exists()  # no run directory left to list as live


@pytest.mark.slow
def test_plan_builds_a_user_model_and_refuses_a_wrong_signature(builders: Path) -> None:
    good = agent("plan", str(QUICKSTART), "--json", *sets(builders, "model.name=mymodels:good"),
                 cwd=builders)
    assert good.returncode == 0, good.stderr[-2000:]
    assert json.loads(good.stdout)["replicas"] == 1
    wrong = agent("plan", str(QUICKSTART), *sets(builders, "model.name=mymodels:keyword_only"),
                  cwd=builders)
    assert wrong.returncode == 2
    (line,) = wrong.stderr.splitlines()
    assert line.startswith("distagent: ") and "mymodels:keyword_only must take" in line


def test_bench_telemetry_help_prints_help(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "telemetry.py"), "--help"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**ENV, "PYTHONPATH": os.pathsep.join(
                              [str(ROOT / "shared"), ENV.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: telemetry.py") and "--gpu-check" in done.stdout
    assert "telemetry tick cost" not in done.stdout  # the benchmark's first line: it did not run
