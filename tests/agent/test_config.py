"""The TOML config: typed parsing, every kind of error (all at once, one line each), --set."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distagent.config import (
    config_from_dict,
    config_to_dict,
    dumps_toml,
    load_config,
    parse_override_value,
    write_resolved,
)
from distagent.schema import JobConfig
from distcore.errors import ConfigErrors

SAMPLES = Path(__file__).resolve().parents[2] / "sample_configs"
PEAK_EXPECTED = ("sample.toml: telemetry.peak_tflops: expected 0 or TFLOP/s per device from "
                 "0.001 to 100000 (0 = the datasheet's, or measured on CPUs), got")


def _errors(raw: dict[str, Any], overrides: tuple[str, ...] = ()) -> list[str]:
    with pytest.raises(ConfigErrors) as caught:
        config_from_dict(raw, label="sample.toml", overrides=overrides)
    return [str(e) for e in caught.value.errors]


def test_empty_config_is_all_defaults() -> None:
    assert config_from_dict({}) == JobConfig()


def test_values_are_typed_by_the_schema() -> None:
    cfg = config_from_dict({
        "data": {"parallel_calls": 4, "synthetic": {"input_shape": [8, 8], "read_latency_ms": 2}},
        "strategy": {"devices": ["GPU:0", "GPU:1"]},
        "optimizer": {"warmup_epochs": 5},
    })
    assert cfg.data.parallel_calls == 4
    assert cfg.data.synthetic.input_shape == (8, 8)
    assert cfg.data.synthetic.read_latency_ms == 2.0
    assert isinstance(cfg.optimizer.warmup_epochs, float)
    assert cfg.strategy.devices == ("GPU:0", "GPU:1")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"optimizer": {"scaling": "quadratic"}},
         'sample.toml: optimizer.scaling: expected "linear", "sqrt" or "none", got "quadratic"'),
        ({"optimizer": {"scalng": "sqrt"}},
         'sample.toml: optimizer.scalng: unknown key; did you mean "scaling"?'),
        ({"optimiser": {}}, "sample.toml: optimiser: unknown key; did you mean \"optimizer\"?"),
        ({"train": {"epochs": "3"}}, 'sample.toml: train.epochs: expected an integer, got "3"'),
        ({"train": {"epochs": 2.5}}, "sample.toml: train.epochs: expected an integer, got 2.5"),
        ({"data": {"cache": 1}},
         "sample.toml: data.cache: expected true or false or a string, got 1"),
        ({"train": {"jit_compile": "yes"}},
         'sample.toml: train.jit_compile: expected true or false, got "yes"'),
        ({"data": {"parallel_calls": "fast"}},
         'sample.toml: data.parallel_calls: expected "autotune" or an integer, got "fast"'),
        ({"data": {"synthetic": {"input_shape": [28, "a"]}}},
         'sample.toml: data.synthetic.input_shape: expected a list of integers, got [28, "a"]'),
        ({"data": {"synthetic": {"input_shape": 28}}},
         "sample.toml: data.synthetic.input_shape: expected a list of integers, got 28"),
        ({"model": "mlp"}, 'sample.toml: model: expected a table, got "mlp"'),
        ({"data": {"tfrecord": {"features": ["a"]}}},
         'sample.toml: data.tfrecord.features: expected a table of strings, got ["a"]'),
        ({"data": {"per_replica_batch_size": 0}},
         "sample.toml: data.per_replica_batch_size: expected an integer > 0, got 0"),
        ({"model": {"hidden_units": [64, 0]}},
         "sample.toml: model.hidden_units: expected a non-empty list of positive integers, "
         "got [64, 0]"),
        ({"train": {"steps_per_execution": 0}},
         "sample.toml: train.steps_per_execution: expected an integer > 0, got 0"),
        ({"data": {"validation_fraction": 1.0}},
         "sample.toml: data.validation_fraction: expected a number in [0, 1), got 1.0"),
        ({"data": {"parallel_calls": 0}},
         'sample.toml: data.parallel_calls: expected "autotune" or an integer >= 1, got 0'),
        ({"data": {"synthetic": {"num_classes": 1}}},
         "sample.toml: data.synthetic.num_classes: expected an integer >= 2, got 1"),
        ({"data": {"synthetic": {"input_shape": [28, 0]}}},
         "sample.toml: data.synthetic.input_shape: expected a non-empty list of positive "
         "integers, got [28, 0]"),
        ({"optimizer": {"base_learning_rate": -0.1}},
         "sample.toml: optimizer.base_learning_rate: expected a number > 0, got -0.1"),
        ({"optimizer": {"base_learning_rate": float("nan")}},
         "sample.toml: optimizer.base_learning_rate: expected a number > 0, got NaN"),
        ({"strategy": {"cpu_replicas": -1}},
         "sample.toml: strategy.cpu_replicas: expected an integer >= 0, got -1"),
        ({"run": {"name": "a/b"}},
         "sample.toml: run.name: expected a non-empty name without '/', got \"a/b\""),
        ({"model": {"name": "transformer"}},
         'sample.toml: model.name: expected mlp, cnn, resnet_small, a keras.applications name '
         '("ResNet50", ...) or "package.module:function", got "transformer"'),
        ({"data": {"keras": {"dataset": "imagenet"}}},
         'sample.toml: data.keras.dataset: expected "mnist", "fashion_mnist", "cifar10" or '
         '"cifar100", got "imagenet"'),
        ({"data": {"tfrecord": {"num_classes": 1}}},
         "sample.toml: data.tfrecord.num_classes: expected 0 (the largest label + 1) or an "
         "integer >= 2, got 1"),
        ({"data": {"source": "tfrecord"}},
         'sample.toml: data.tfrecord.files: required by source = "tfrecord": a glob of files'),
        ({"data": {"source": "npz"}},
         'sample.toml: data.npz.path: required by source = "npz": a .npz file with x and y'),
        ({"data": {"source": "tfds"}},
         'sample.toml: data.tfds.name: required by source = "tfds": a TFDS dataset name'),
        ({"strategy": {"kind": "one_device", "devices": ["GPU:0", "GPU:1"]}},
         'sample.toml: strategy.devices: expected at most one device for kind = "one_device"'),
        ({"strategy": {"devices": ["TPU:0"]}},
         'sample.toml: strategy.devices: expected names like "GPU:0", got "TPU:0"'),
        ({"telemetry": {"peak_tflops": -1.0}},
         PEAK_EXPECTED + " -1.0"),
        ({"telemetry": {"peak_tflops": float("inf")}},
         PEAK_EXPECTED + " Infinity"),
        ({"telemetry": {"peak_tflops": float("nan")}},
         PEAK_EXPECTED + " NaN"),
        ({"telemetry": {"peak_tflops": 1e-320}}, PEAK_EXPECTED + " 1e-320"),
        ({"telemetry": {"peak_tflops": 5e-324}}, PEAK_EXPECTED + " 5e-324"),
        ({"telemetry": {"peak_tflops": 0.0009}}, PEAK_EXPECTED + " 0.0009"),
        ({"telemetry": {"peak_tflops": 1e6}}, PEAK_EXPECTED + " 1000000.0"),
        ({"cost": {"price_gpu_hour": -2.5}}, "sample.toml: cost.price_gpu_hour: expected USD per "
         "GPU-hour from 0 to 1e+06 (0 = none), got -2.5"),
        ({"cost": {"price_kwh": float("nan")}}, "sample.toml: cost.price_kwh: expected USD per kWh "
         "from 0 to 1e+06 (0 = none), got NaN"),
        ({"cost": {"price_usd": 1}},
         'sample.toml: cost.price_usd: unknown key; did you mean "price_kwh"?'),
    ],
)
def test_each_kind_of_error_is_one_line_naming_file_key_and_allowed(
    raw: dict[str, Any], expected: str
) -> None:
    assert expected in _errors(raw)


def test_every_problem_is_reported_at_once_one_line_each() -> None:
    errors = _errors({
        "optimizer": {"scaling": "quadratic", "scalng": 1},
        "data": {"per_replica_batch_size": 0, "parallel_calls": "fast"},
        "train": {"epochs": 0},
    })
    assert len(errors) == 5
    assert all("\n" not in e and e.startswith("sample.toml: ") for e in errors)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3", 3), ("0.1", 0.1), ("true", True), ("[28,28,1]", [28, 28, 1]), ('"x"', "x"),
        ("cnn", "cnn"), ("/data/runs", "/data/runs"), ("GPU:0", "GPU:0"), ("", ""),
        ('{image = "float32[2]"}', {"image": "float32[2]"}),
    ],
)
def test_override_values_are_toml_else_strings(text: str, value: Any) -> None:
    assert parse_override_value(text) == value


def test_overrides_are_typed_by_the_schema() -> None:
    cfg = config_from_dict({}, overrides=(
        "data.synthetic.input_shape=[28,28,1]", "train.epochs=3", "model.name=cnn",
        "run.logdir=/data/runs", "optimizer.scaling=sqrt", "data.parallel_calls=8",
    ))
    assert cfg.data.synthetic.input_shape == (28, 28, 1)
    assert (cfg.train.epochs, cfg.model.name, cfg.run.logdir) == (3, "cnn", "/data/runs")
    assert (cfg.optimizer.scaling, cfg.data.parallel_calls) == ("sqrt", 8)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("train.epochs=x", 'sample.toml (--set): train.epochs: expected an integer, got "x"'),
        ("train.epoch=3", 'sample.toml (--set): train.epoch: unknown key; did you mean "epochs"?'),
        ("epochs", "sample.toml (--set): epochs: expected KEY=VALUE"),
        ("model.name.x=1", "sample.toml (--set): model.name.x: is inside a non-table value"),
    ],
)
def test_bad_overrides_are_reported_as_such(override: str, expected: str) -> None:
    assert expected in _errors({"model": {"name": "mlp"}}, (override,))


def test_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[train\nepochs = 1\n")
    with pytest.raises(ConfigErrors, match=r"^bad.toml: not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigErrors, match="no such file"):
        load_config(tmp_path / "missing.toml")


def test_resolved_config_round_trips(tmp_path: Path) -> None:
    cfg = load_config(SAMPLES / "quickstart.toml", [
        'data.tfrecord.features={image = "uint8[28,28,1]", label = "int64"}',
        "strategy.devices=[\"GPU:0\"]", "cluster.workers=[\"a:1\", \"b:2\"]",
    ])
    path = write_resolved(cfg, tmp_path / "run")
    assert path.name == "config.resolved.toml"
    assert load_config(path) == cfg
    assert config_to_dict(cfg)["data"]["tfrecord"]["features"] == {
        "image": "uint8[28,28,1]", "label": "int64"}


def test_dumps_toml_writes_sections() -> None:
    text = dumps_toml(config_to_dict(JobConfig()))
    assert "[data.synthetic]\n" in text
    assert tomllib.loads(text)["data"]["synthetic"]["input_shape"] == [28, 28, 1]


@settings(max_examples=200, deadline=None)
@given(st.recursive(
    st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
))
def test_dumps_toml_round_trips_every_value_toml_holds(value: object) -> None:
    """-inf stays -inf, nan stays nan, an emoji or any scalar value reads back as written."""
    data = {"table": {"key": value}}
    back = tomllib.loads(dumps_toml(data))
    assert _same(back, data)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.parametrize("peak", ["1e-320", "5e-324", "-0.5", "nan", "inf", "1e6"])
def test_a_peak_no_device_has_is_refused_at_start_in_one_line(tmp_path: Path, peak: str) -> None:
    """MFU divides by the peak: a denormal one made every MFU infinite."""
    config = tmp_path / "sample.toml"
    config.write_text("[train]\nepochs = 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "distagent", "plan", str(config), "--set",
         f"telemetry.peak_tflops={peak}"], capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "sample.toml (--set): telemetry.peak_tflops: expected 0 or TFLOP/s" in line


def test_cli_prints_one_line_per_problem_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "sample.toml"
    bad.write_text('[optimizer]\nscaling = "quadratic"\n[train]\nepochs = 0\n')
    done = subprocess.run(
        [sys.executable, "-m", "distagent", "plan", str(bad), "--set", "data.deterministic=maybe"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == [
        'distagent: sample.toml (--set): data.deterministic: expected true or false, got "maybe"',
        'sample.toml: optimizer.scaling: expected "linear", "sqrt" or "none", got "quadratic"',
        "sample.toml: train.epochs: expected an integer > 0, got 0",
    ]
    assert "Traceback" not in done.stderr
