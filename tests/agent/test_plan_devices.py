"""resolve_strategy on the 4 logical CPU devices of the test session, and the plan command."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from distagent.commands import plan as plan_command
from distagent.devices import resolve_strategy
from distagent.schema import StrategyConfig
from distcore.errors import DistmonError

SAMPLES = Path(__file__).resolve().parents[2] / "sample_configs"


@pytest.fixture
def no_gpu(tf: Any) -> None:
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("GPUs visible: cpu_replicas does not apply (runs with CUDA_VISIBLE_DEVICES=)")


@pytest.mark.parametrize("replicas", [1, 2, 4])
def test_cpu_replicas_use_the_first_n_logical_devices(
    no_gpu: None, cpu_devices: list[str], replicas: int
) -> None:
    setup = resolve_strategy(StrategyConfig(cpu_replicas=replicas))
    assert setup.devices == tuple(cpu_devices[:replicas])
    assert setup.replicas == setup.strategy.num_replicas_in_sync == replicas
    assert (setup.workers, setup.warnings) == (1, ())


def test_more_cpu_replicas_than_the_started_runtime_has_is_a_clear_error(no_gpu: None) -> None:
    with pytest.raises(DistmonError, match=r"cpu_replicas = 8.*already started.*4 logical"):
        resolve_strategy(StrategyConfig(cpu_replicas=8))


@pytest.mark.parametrize("ops", ["nccl", "hierarchical_copy"])
def test_gpu_all_reduce_on_cpu_replicas_falls_back_with_a_warning(no_gpu: None, ops: Any) -> None:
    setup = resolve_strategy(StrategyConfig(cpu_replicas=2, cross_device_ops=ops))
    assert setup.replicas == 2
    assert len(setup.warnings) == 1 and ops in setup.warnings[0]


def test_one_device(tf: Any) -> None:
    setup = resolve_strategy(StrategyConfig(kind="one_device", cpu_replicas=2))
    assert isinstance(setup.strategy, tf.distribute.OneDeviceStrategy)
    assert setup.replicas == 1 and len(setup.devices) == 1


def test_named_devices(no_gpu: None, cpu_devices: list[str]) -> None:
    setup = resolve_strategy(StrategyConfig(devices=("CPU:1", "CPU:3")))
    assert setup.devices == (cpu_devices[1], cpu_devices[3])
    with pytest.raises(DistmonError, match="CPU:9 not found"):
        resolve_strategy(StrategyConfig(devices=("CPU:9",)))


def test_multi_worker_without_a_cluster_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("TF_CONFIG", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_JOB_ID"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(DistmonError, match="needs a cluster: set TF_CONFIG"):
        resolve_strategy(StrategyConfig(kind="multi_worker"))


def _args(config: Path, *overrides: str, as_json: bool = False) -> argparse.Namespace:
    return argparse.Namespace(config=str(config), overrides=list(overrides), json=as_json)


def test_plan_command_prints_the_plan(no_gpu: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert plan_command.run(_args(SAMPLES / "quickstart.toml", "strategy.cpu_replicas=4")) == 0
    out = capsys.readouterr().out
    assert "32 per replica × 4 = 128 global" in out
    assert "0.01 @ batch 32 × 4 replicas (linear) = 0.04" in out
    assert "warning:" not in out


def test_plan_command_json_includes_strategy_warnings(
    no_gpu: None, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _args(SAMPLES / "quickstart.toml", "strategy.cross_device_ops=nccl",
                 "optimizer.warmup_epochs=0", as_json=True)
    assert plan_command.run(args) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["replicas"] == 2 and plan["global_batch_size"] == 64
    assert any("nccl" in w for w in plan["warnings"])
    assert any("no warmup" in w for w in plan["warnings"])


def _no_cluster_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("TF_CONFIG", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_JOB_ID"):
        monkeypatch.delenv(var, raising=False)


def _tf_config(workers: int, index: int) -> str:
    cluster = {"worker": [f"127.0.0.1:{20000 + i}" for i in range(workers)]}
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})


@pytest.mark.parametrize(
    ("overrides", "tf_config", "workers"),
    [
        (['cluster.workers=["127.0.0.1:1", "127.0.0.1:2"]'], None, 2),
        ([], _tf_config(3, 2), 3),  # the same plan from any worker
        (['cluster.workers=["127.0.0.1:1"]'], _tf_config(4, 0), 4),  # TF_CONFIG first, as start
    ],
)
def test_plan_of_a_multi_worker_job_does_not_join_its_cluster(
    no_gpu: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    overrides: list[str], tf_config: str | None, workers: int,
) -> None:
    """No peer listens on these addresses: a plan that joined the cluster would wait for them
    (up to [cluster] timeout_seconds) and then fail."""
    _no_cluster_env(monkeypatch)
    if tf_config:
        monkeypatch.setenv("TF_CONFIG", tf_config)
    args = _args(SAMPLES / "quickstart.toml", "strategy.kind=multi_worker",
                 "optimizer.warmup_epochs=0", *overrides, as_json=True)
    assert plan_command.run(args) == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan["workers"], plan["replicas"]) == (workers, workers)
    assert plan["global_batch_size"] == workers * plan["per_replica_batch_size"]
    assert any("does not join the cluster" in w for w in plan["warnings"]), plan["warnings"]


def test_plan_of_a_multi_worker_job_without_a_cluster_says_what_it_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_cluster_env(monkeypatch)
    args = _args(SAMPLES / "quickstart.toml", "strategy.kind=multi_worker")
    with pytest.raises(DistmonError, match="the plan needs the cluster") as raised:
        plan_command.run(args)
    assert "--task-index" not in str(raised.value)
