"""The input pipeline on 4 CPU logical replicas: equal shares per replica, the plan's sharding
policy, every TFRecord example once per epoch, and sources that are deterministic and learnable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distagent.config import config_from_dict
from distagent.data import open_source
from distagent.data.cost import sort_plan
from distagent.data.tfrecord import write_examples
from distagent.devices import resolve_strategy
from distagent.pipeline import InputData, build_input, plan_for
from distagent.schema import JobConfig

REPLICAS = 4


def _cfg(*overrides: str) -> JobConfig:
    base = ("strategy.cpu_replicas=4", "data.synthetic.num_examples=1000",
            "data.synthetic.input_shape=[6]", "data.per_replica_batch_size=8")
    return config_from_dict({}, overrides=base + overrides)


def _build(cfg: JobConfig, tf: Any) -> tuple[Any, InputData, Any]:
    setup = resolve_strategy(cfg.strategy)
    plan = plan_for(cfg, replicas=setup.replicas, devices=setup.devices)
    return setup, build_input(cfg, plan, strategy=setup.strategy), plan


@pytest.mark.parametrize("optimize", [True, False])
def test_each_replica_gets_exactly_its_share_every_step(tf: Any, optimize: bool) -> None:
    setup, data, plan = _build(_cfg(f"data.optimize={str(optimize).lower()}"), tf)
    assert setup.replicas == REPLICAS and plan.global_batch_size == 32
    # 900 training examples = 28 whole batches + 4: run past the end of the first pass.
    steps = plan.steps_per_epoch + 3
    dist = setup.strategy.experimental_distribute_dataset(data.train)
    for step, (x, y) in enumerate(dist):
        if step == steps:
            break
        xs = setup.strategy.experimental_local_results(x)
        ys = setup.strategy.experimental_local_results(y)
        assert [int(t.shape[0]) for t in xs] == [8] * REPLICAS
        assert [int(t.shape[0]) for t in ys] == [8] * REPLICAS
    val = setup.strategy.experimental_distribute_dataset(data.validation)
    shares = [[int(t.shape[0]) for t in setup.strategy.experimental_local_results(x)]
              for x, _ in val]
    assert shares == [[8] * REPLICAS] * plan.validation_steps == [[8] * REPLICAS] * 3


def _ids_dataset(tmp_path: Path, n: int, files: int, *overrides: str) -> JobConfig:
    """TFRecords written here, whose features carry the example id, to check what is read.

    data.deterministic=true: tests here cut the stream into epochs by counting batches, and with
    it off parallel batching may hand out a batch of the next epoch before the last one of this
    epoch (whole batches reordered, their contents unchanged: its contract, checked below)."""
    ids = np.arange(n, dtype=np.float32)
    write_examples(tmp_path / "ids", np.stack([ids, ids * 2.0], axis=1), np.arange(n) % 3,
                   num_files=files)
    return _cfg(
        "data.source=tfrecord", f"data.tfrecord.files={tmp_path}/ids-*.tfrecord",
        'data.tfrecord.features={image = "float32[2]", label = "int64"}',
        "data.per_replica_batch_size=5", "data.validation_fraction=0.0",
        "data.deterministic=true", *overrides,
    )


def _ids(batches: list[Any]) -> list[int]:
    return sorted(int(v) for x, _ in batches for v in x.numpy()[:, 0])


@pytest.mark.parametrize("optimize", ["true", "false"])
def test_tfrecord_source_is_read_completely_once_per_epoch(
    tf: Any, tmp_path: Path, optimize: str
) -> None:
    _, data, plan = _build(_ids_dataset(tmp_path, 200, 3, f"data.optimize={optimize}"), tf)
    assert (plan.num_examples, plan.steps_per_epoch, data.num_classes) == (200, 10, 3)
    batches = list(data.train.take(2 * plan.steps_per_epoch))
    assert _ids(batches[:10]) == list(range(200))
    assert _ids(batches[10:]) == list(range(200))


def _batch_ids(data: InputData, batches: int) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in x.numpy()[:, 0]) for x, _ in data.train.take(batches)]


def test_nondeterministic_order_moves_whole_batches_only(tf: Any, tmp_path: Path) -> None:
    # The default data.deterministic=false: over 100 epochs, the batches are the ordered
    # pipeline's batches (same shuffle seed), each exactly once, none held back for long. An
    # example read twice or dropped would make a batch that the ordered pipeline never makes.
    steps, slack = 1000, 20
    ordered = _batch_ids(_build(_ids_dataset(tmp_path, 200, 3), tf)[1], steps + slack)
    free = _build(_ids_dataset(tmp_path, 200, 3, "data.deterministic=false"), tf)[1]
    got = _batch_ids(free, steps)
    assert len(set(got)) == steps and set(got) <= set(ordered)
    assert set(ordered[:steps - slack]) <= set(got)


def test_validation_split_is_disjoint_and_fixed(tf: Any, tmp_path: Path) -> None:
    _, data, plan = _build(_ids_dataset(tmp_path, 200, 2, "data.validation_fraction=0.2"), tf)
    assert (plan.train_examples, plan.validation_examples) == (160, 40)
    val = _ids(list(data.validation))
    assert val == _ids(list(data.validation)) and len(val) == 40
    train = _ids(list(data.train.take(plan.steps_per_epoch)))
    assert sorted(val + train) == list(range(200))


@pytest.mark.parametrize(
    ("files", "policy"), [(4, "FILE"), (1, "FILE")],  # one worker: one file is enough
)
def test_sharding_policy_is_what_the_plan_says(tf: Any, tmp_path: Path, files: int,
                                               policy: str) -> None:
    _, data, plan = _build(_ids_dataset(tmp_path, 40, files, "data.validation_fraction=0.5"), tf)
    assert plan.shard_policy == data.shard_policy == policy
    policies = tf.data.experimental.AutoShardPolicy
    assert (data.train.options().experimental_distribute.auto_shard_policy
            == getattr(policies, policy))
    # Finite validation splits evenly by data whatever the files (equal batches per worker).
    assert data.validation.options().experimental_distribute.auto_shard_policy == policies.DATA


def test_synthetic_source_shards_by_data(tf: Any) -> None:
    _, data, plan = _build(_cfg(), tf)
    assert plan.shard_policy == "DATA"
    assert (data.train.options().experimental_distribute.auto_shard_policy
            == tf.data.experimental.AutoShardPolicy.DATA)


def _examples(cfg: JobConfig) -> tuple[np.ndarray, np.ndarray]:
    pairs = list(open_source(cfg).read(1).as_numpy_iterator())
    return np.stack([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def test_synthetic_data_is_deterministic_from_the_seed(tf: Any) -> None:
    x1, y1 = _examples(_cfg("run.seed=1", "data.synthetic.num_examples=64"))
    x2, y2 = _examples(_cfg("run.seed=1", "data.synthetic.num_examples=64"))
    x3, _ = _examples(_cfg("run.seed=2", "data.synthetic.num_examples=64"))
    assert np.array_equal(x1, x2) and np.array_equal(y1, y2)
    assert not np.array_equal(x1, x3)
    assert set(y1) == set(range(10))


def test_synthetic_data_is_learnable(tf: Any) -> None:
    x, y = _examples(_cfg("data.synthetic.num_examples=2000", "data.synthetic.input_shape=[8,8]"))
    train_x, train_y, test_x, test_y = x[:1500], y[:1500], x[1500:], y[1500:]
    flat = train_x.reshape(len(train_x), -1)
    means = np.stack([flat[train_y == c].mean(axis=0) for c in range(10)])
    dists = ((test_x.reshape(len(test_x), 1, -1) - means[None]) ** 2).sum(axis=2)
    accuracy = float((dists.argmin(axis=1) == test_y).mean())
    assert accuracy > 0.9  # a nearest-class-mean classifier: far above chance (0.1)


def test_simulated_costs_leave_the_examples_unchanged(tf: Any) -> None:
    plain = _cfg("data.synthetic.num_examples=96", "data.shuffle_buffer=0",
                 "data.deterministic=true", "data.validation_fraction=0")
    costly = _cfg("data.synthetic.num_examples=96", "data.shuffle_buffer=0",
                  "data.deterministic=true", "data.validation_fraction=0",
                  "data.synthetic.preprocess_cost_ms=0.2", "data.synthetic.read_latency_ms=0.5")
    a = [x.numpy() for x, _ in _build(plain, tf)[1].train.take(3)]
    b = [x.numpy() for x, _ in _build(costly, tf)[1].train.take(3)]
    assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))


def test_npz_images_become_scaled_floats_with_a_channel(tf: Any, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "d.npz", x=rng.integers(0, 256, (64, 5, 5), dtype=np.uint8),
             y=rng.integers(0, 4, 64))
    _, data, _ = _build(_cfg("data.source=npz", f"data.npz.path={tmp_path}/d.npz",
                             "data.per_replica_batch_size=4"), tf)
    x, y = next(iter(data.train))
    assert data.input_shape == (5, 5, 1) and data.num_classes == 4
    assert x.shape == (16, 5, 5, 1) and x.dtype == tf.float32 and y.dtype == tf.int32
    assert float(tf.reduce_min(x)) >= 0.0 and float(tf.reduce_max(x)) <= 1.0


@pytest.mark.parametrize(
    ("cost_ms", "one_sort_ms", "expected"),
    [(1.0, 0.2, (4096, 5)), (0.2, 0.2, (4096, 1)), (0.1, 0.2, (2048, 1)),
     (0.0001, 0.2, (16, 1)), (5.0, 0.25, (4096, 20))],
)
def test_cpu_cost_is_sized_from_the_calibrated_sort(
    cost_ms: float, one_sort_ms: float, expected: tuple[int, int]
) -> None:
    assert sort_plan(cost_ms, one_sort_ms) == expected


@pytest.mark.parametrize("optimize", [True, False])
def test_pipeline_options_follow_optimize(tf: Any, optimize: bool) -> None:
    cfg = _cfg(f"data.optimize={str(optimize).lower()}", "data.deterministic=false")
    options = _build(cfg, tf)[1].train.options()
    assert options.autotune.enabled is optimize
    assert options.deterministic is (not optimize)
    assert options.threading.max_intra_op_parallelism == (1 if optimize else None)
