"""The scaling plan: every rule and every warning as table rows, and the seed's example through
`distagent plan --json` in a real subprocess."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distagent.config import config_from_dict
from distagent.plan import make_plan, scaled_learning_rate, shard_policy, warning_kind

SAMPLES = Path(__file__).resolve().parents[2] / "sample_configs"


def _plan(overrides: tuple[str, ...] = (), *, replicas: int = 4, workers: int = 1,
          num_examples: int | None = 4096, **kwargs: Any) -> Any:
    cfg = config_from_dict({"data": {"validation_fraction": 0.0}}, overrides=overrides)
    return make_plan(cfg, replicas=replicas, devices=[f"CPU:{i}" for i in range(replicas)],
                     workers=workers, num_examples=num_examples, **kwargs)


@pytest.mark.parametrize(
    ("per_replica", "replicas", "global_batch"),
    [(32, 1, 32), (32, 4, 128), (64, 8, 512), (1, 3, 3), (256, 64, 16384)],
)
def test_global_batch_is_per_replica_times_replicas(
    per_replica: int, replicas: int, global_batch: int
) -> None:
    plan = _plan((f"data.per_replica_batch_size={per_replica}",), replicas=replicas)
    assert plan.global_batch_size == global_batch
    assert plan.per_replica_batch_size == per_replica


@pytest.mark.parametrize(
    ("base", "base_batch", "global_batch", "rule", "expected"),
    [
        (0.01, 32, 128, "linear", 0.04),
        (0.01, 32, 128, "sqrt", 0.02),
        (0.01, 32, 128, "none", 0.01),
        (0.1, 256, 8192, "linear", 3.2),
        (0.1, 256, 1024, "sqrt", 0.2),
        (0.1, 256, 128, "linear", 0.05),
        (0.001, 64, 64, "sqrt", 0.001),
    ],
)
def test_scaling_rules(base: float, base_batch: int, global_batch: int, rule: str,
                       expected: float) -> None:
    assert math.isclose(scaled_learning_rate(base, base_batch, global_batch, rule), expected)


@pytest.mark.parametrize(
    ("overrides", "replicas", "rate", "provenance"),
    [
        ((), 4, 0.04, "0.01 @ batch 32 × 4 replicas (linear) = 0.04"),
        (("optimizer.scaling=sqrt",), 4, 0.02, "0.01 @ batch 32 × 4 replicas (sqrt) = 0.02"),
        (("optimizer.scaling=none",), 4, 0.01, "0.01 @ batch 32 × 4 replicas (none) = 0.01"),
        (("optimizer.base_batch_size=64",), 4, 0.02,
         "0.01 @ batch 64 → 128 (32 × 4 replicas) (linear) = 0.02"),
        (("optimizer.base_learning_rate=0.1", "optimizer.base_batch_size=256",
          "data.per_replica_batch_size=64"), 16, 0.4,
         "0.1 @ batch 256 → 1024 (64 × 16 replicas) (linear) = 0.4"),
    ],
)
def test_learning_rate_and_provenance(overrides: tuple[str, ...], replicas: int, rate: float,
                                      provenance: str) -> None:
    plan = _plan(overrides, replicas=replicas, num_examples=100_000)
    assert math.isclose(plan.learning_rate, rate)
    assert plan.learning_rate_provenance == provenance


def test_base_batch_defaults_to_per_replica_batch() -> None:
    assert _plan(("data.per_replica_batch_size=48",)).base_batch_size == 48


@pytest.mark.parametrize(
    ("overrides", "num_examples", "steps", "warmup", "total"),
    [
        ((), 4096, 32, 0, 32),  # 4096 / 128
        (("optimizer.warmup_epochs=2", "train.epochs=5"), 4096, 32, 64, 160),
        (("optimizer.warmup_epochs=0.5",), 4096, 32, 16, 32),
        (("train.steps_per_epoch=100", "optimizer.warmup_epochs=1"), 4096, 100, 100, 100),
        (("train.steps_per_epoch=10",), None, 10, 0, 10),
        ((), 100, 1, 0, 1),  # smaller than one batch: one step, repeating examples
        ((), 4000, 31, 0, 31),  # the partial batch is not a step
    ],
)
def test_steps_and_warmup(overrides: tuple[str, ...], num_examples: int | None, steps: int,
                          warmup: int, total: int) -> None:
    plan = _plan(overrides, num_examples=num_examples)
    assert (plan.steps_per_epoch, plan.warmup_steps, plan.total_steps) == (steps, warmup, total)


def test_unknown_size_needs_steps_per_epoch() -> None:
    from distcore.errors import ConfigError

    with pytest.raises(ConfigError, match=r"train\.steps_per_epoch"):
        _plan(num_examples=None)


@pytest.mark.parametrize(
    ("overrides", "replicas", "num_examples", "expected"),
    [
        (("optimizer.name=adam", "optimizer.warmup_epochs=1"), 4, 4096, {"adam_linear"}),
        (("optimizer.name=adamw", "optimizer.warmup_epochs=1"), 4, 4096, {"adam_linear"}),
        (("optimizer.name=adam", "optimizer.scaling=sqrt", "optimizer.warmup_epochs=1"), 4,
         4096, set()),
        (("optimizer.name=adam",), 1, 4096, set()),  # nothing scaled
        (("optimizer.name=momentum",), 4, 4096, {"no_warmup"}),
        (("optimizer.warmup_epochs=1",), 4, 4096, set()),
        (("optimizer.scaling=none",), 4, 4096, set()),
        (("optimizer.warmup_epochs=1", "data.per_replica_batch_size=1024"), 16, 2**20,
         {"large_batch"}),
        (("optimizer.warmup_epochs=1", "data.per_replica_batch_size=512"), 16, 2**20, set()),
        (("optimizer.warmup_epochs=1",), 4, 100, {"smaller_than_batch"}),
        (("optimizer.warmup_epochs=1",), 4, 4000, {"partial_batch"}),
        (("optimizer.warmup_epochs=1", "data.validation_fraction=0.01"), 4, 4096 + 41,
         {"small_validation"}),
        (("optimizer.warmup_epochs=1", "data.source=tfrecord", "data.tfrecord.files=x",
          'data.tfrecord.features={x = "float32[2]", label = "int64"}'), 4, 4096, set()),
    ],
)
def test_warnings(overrides: tuple[str, ...], replicas: int, num_examples: int,
                  expected: set[str]) -> None:
    plan = _plan(overrides, replicas=replicas, num_examples=num_examples, num_files=1)
    assert {warning_kind(w) for w in plan.warnings} == expected


def test_too_few_files_for_the_workers_warns() -> None:
    plan = _plan(("optimizer.warmup_epochs=1", "data.source=tfrecord", "data.tfrecord.files=x",
                  'data.tfrecord.features={x = "float32[2]", label = "int64"}'),
                 replicas=4, workers=2, num_files=1)
    assert plan.shard_policy == "DATA"
    assert [warning_kind(w) for w in plan.warnings] == ["few_files"]


@pytest.mark.parametrize(
    ("source", "files", "workers", "policy", "warns"),
    [
        ("tfrecord", 8, 2, "FILE", False),
        ("tfrecord", 2, 2, "FILE", False),
        ("tfrecord", 1, 2, "DATA", True),
        ("tfrecord", 4, 1, "FILE", False),
        ("synthetic", None, 2, "DATA", False),
        ("npz", None, 4, "DATA", False),
    ],
)
def test_shard_policy(source: str, files: int | None, workers: int, policy: str,
                      warns: bool) -> None:
    got, warnings = shard_policy(source, files, workers)
    assert got == policy
    assert bool(warnings) == warns


def test_cache_is_skipped_when_it_does_not_fit() -> None:
    assert _plan(example_bytes=4 * 784).cache
    big = _plan(num_examples=10**7, example_bytes=4 * 150_528)
    assert not big.cache and "cache" in {warning_kind(w) for w in big.warnings}
    assert not _plan(("data.optimize=false",)).cache


def test_json_has_the_documented_keys() -> None:
    out = _plan().to_json()
    keys = {"replicas", "devices", "per_replica_batch_size", "global_batch_size",
            "base_learning_rate", "base_batch_size", "scaling_rule", "learning_rate",
            "warmup_steps", "steps_per_epoch", "warnings"}
    assert keys <= set(out)
    json.dumps(out)


SEED_EXAMPLE = ["--set", "strategy.cpu_replicas=4", "--set", "optimizer.base_learning_rate=0.01",
                "--set", "data.per_replica_batch_size=32"]


def _check_seed_example(plan: dict[str, Any], rule: str, rate: float) -> None:
    assert (plan["replicas"], plan["per_replica_batch_size"]) == (4, 32)
    assert plan["global_batch_size"] == 128
    assert plan["scaling_rule"] == rule
    assert math.isclose(plan["learning_rate"], rate)
    assert plan["base_batch_size"] == 32


@pytest.mark.slow
def test_seed_example_through_plan_json() -> None:
    """32 per replica on 4 replicas = 128; 0.01 -> 0.04 linear (a real `distagent` process)."""
    done = subprocess.run(
        [sys.executable, "-m", "distagent", "plan", str(SAMPLES / "quickstart.toml"), "--json",
         *SEED_EXAMPLE, "--set", "optimizer.scaling=linear"],
        capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    if "GPU" in plan["devices"][0].upper():
        pytest.skip("GPUs visible: cpu_replicas does not apply (runs with CUDA_VISIBLE_DEVICES=)")
    _check_seed_example(plan, "linear", 0.04)


def test_seed_example_sqrt_through_plan_json(tf: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The same with sqrt: 0.01 -> 0.02 (the command's handler, in this process's 4 CPUs)."""
    from distagent.cli import build_parser

    if tf.config.list_physical_devices("GPU"):
        pytest.skip("GPUs visible: cpu_replicas does not apply (runs with CUDA_VISIBLE_DEVICES=)")
    args = build_parser().parse_args(["plan", str(SAMPLES / "quickstart.toml"), "--json",
                                      *SEED_EXAMPLE, "--set", "optimizer.scaling=sqrt"])
    assert args.handler == "distagent.commands.plan:run"
    from distagent.commands.plan import run

    assert run(args) == 0
    _check_seed_example(json.loads(capsys.readouterr().out), "sqrt", 0.02)
