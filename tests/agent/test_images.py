"""The images source through the real pipeline: JPEG/PNG folders and TFRecords written here, decoded
once and cached, augmented every pass, and the same examples from the naive and the optimized
pipeline."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distagent.config import config_from_dict
from distagent.data import Source, open_source
from distagent.data.samples import ring_images, write_image_folders, write_image_tfrecords
from distagent.devices import resolve_strategy
from distagent.pipeline import build_input, plan_for
from distagent.schema import JobConfig
from distcore.errors import DistmonError

SIZE = 32
NO_AUGMENT = ("data.augment.flip=false", "data.augment.crop=0.0",
              "data.augment.brightness=0.0")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """96 ring images in 3 class folders, JPEG and PNG mixed."""
    root = tmp_path_factory.mktemp("images")
    images, labels = ring_images(96, 3, 40, seed=1)  # 40x40 on disk, resized to 32x32
    write_image_folders(root, images[:64], labels[:64], fmt="jpeg")
    write_image_folders(root, images[64:], labels[64:], fmt="png")
    return root


def _cfg(*overrides: str, directory: Path | None = None) -> JobConfig:
    base = ["data.source=images", f"data.images.image_size=[{SIZE},{SIZE}]",
            "strategy.cpu_replicas=2", "data.per_replica_batch_size=4",
            "data.validation_fraction=0.25", "model.name=MobileNetV2"]
    if directory is not None:
        base.append(f"data.images.directory={directory}")
    return config_from_dict({}, overrides=[*base, *overrides])


def _build(cfg: JobConfig, source: Source | None = None) -> tuple[Any, Any]:
    setup = resolve_strategy(cfg.strategy)
    plan = plan_for(cfg, replicas=setup.replicas, devices=setup.devices)
    return plan, build_input(cfg, plan, source=source)


def _counting(source: Source, tf: Any) -> tuple[Source, list[int]]:
    """The source with its decode counted by a Python side effect on every call."""
    calls: list[int] = []
    lock = threading.Lock()
    decode = source.decode
    assert decode is not None

    def count(x: Any) -> Any:
        with lock:
            calls.append(1)
        return x

    def counted(path: Any, label: Any) -> tuple[Any, Any]:
        image, label = decode(path, label)
        image = tf.numpy_function(count, [image], tf.uint8, stateful=True)
        return tf.ensure_shape(image, [SIZE, SIZE, 3]), label

    return dataclasses.replace(source, decode=counted), calls


@pytest.mark.parametrize(("optimize", "passes"), [("true", 1), ("false", 3)])
def test_decode_runs_once_per_example_when_cached(tf: Any, folder: Path, optimize: str,
                                                  passes: int) -> None:
    cfg = _cfg(f"data.optimize={optimize}", directory=folder)
    source, calls = _counting(open_source(cfg), tf)
    plan, data = _build(cfg, source)
    assert (plan.num_examples, plan.train_examples, plan.validation_examples) == (96, 72, 24)
    for _ in data.train.take(3 * plan.steps_per_epoch):  # three epochs
        pass
    for _ in range(3):
        for _ in data.validation:
            pass
    # Optimized: the train split's 72 and the validation split's 24, decoded once each. Naive:
    # every pass decodes again (and the shuffle buffer refills from the next pass ahead).
    if passes == 1:
        assert len(calls) == 96
    else:
        assert len(calls) >= 3 * 96


def _epoch(data: Any, steps: int) -> list[tuple[int, bytes]]:
    return sorted((int(y), np.round(x * 255).astype(np.uint8).tobytes())
                  for xs, ys in data.train.take(steps).as_numpy_iterator()
                  for x, y in zip(xs, ys, strict=True))


def test_naive_and_optimized_pipelines_yield_the_same_examples_per_epoch(
    tf: Any, folder: Path
) -> None:
    epochs = {}
    for optimize in ("true", "false"):
        # deterministic: with it off, parallel batching may hand out a batch of the next epoch
        # before the last one of this epoch (seen once in a loaded run), which is its contract.
        plan, data = _build(_cfg(f"data.optimize={optimize}", "data.deterministic=true",
                                 *NO_AUGMENT, directory=folder))
        epochs[optimize] = _epoch(data, plan.steps_per_epoch)
        assert len(epochs[optimize]) == plan.train_examples == 72
    assert epochs["true"] == epochs["false"]
    assert {label for label, _ in epochs["true"]} == {0, 1, 2}


def test_augmentation_changes_training_images_but_not_validation(tf: Any, folder: Path) -> None:
    ordered = ("data.shuffle_buffer=0", "data.deterministic=true")
    _, plain = _build(_cfg(*NO_AUGMENT, *ordered, directory=folder))
    _, augmented = _build(_cfg("data.augment.brightness=0.3", *ordered, directory=folder))
    x_plain, _ = next(iter(plain.train))
    x_aug, _ = next(iter(augmented.train))
    assert x_aug.shape == x_plain.shape == (8, SIZE, SIZE, 3)
    assert float(tf.reduce_min(x_aug)) >= 0.0 and float(tf.reduce_max(x_aug)) <= 1.0
    assert not np.allclose(x_aug.numpy(), x_plain.numpy())
    first = [x.numpy() for x, _ in augmented.validation]
    again = [x.numpy() for x, _ in augmented.validation]
    same_plain = [x.numpy() for x, _ in plain.validation]
    assert all(np.array_equal(a, b) and np.array_equal(a, c)
               for a, b, c in zip(first, again, same_plain, strict=True))


def test_tfrecords_of_encoded_images_read_every_example_once_per_epoch(
    tf: Any, tmp_path: Path
) -> None:
    images, labels = ring_images(48, 4, SIZE, seed=2)
    write_image_tfrecords(tmp_path / "train", images, labels, num_files=3)
    # deterministic: the epoch is counted in batches (see the naive and optimized test).
    cfg = _cfg(f"data.images.files={tmp_path}/train-*.tfrecord", "data.validation_fraction=0.0",
               "data.deterministic=true", *NO_AUGMENT)
    plan, data = _build(cfg)
    assert (plan.num_examples, plan.shard_policy, data.num_classes) == (48, "FILE", 4)
    assert data.input_shape == (SIZE, SIZE, 3)
    got = sorted(int(y) for _, ys in data.train.take(plan.steps_per_epoch).as_numpy_iterator()
                 for y in ys)
    assert got == sorted(labels.tolist())


def test_a_cache_file_path_caches_on_disk(tf: Any, folder: Path, tmp_path: Path) -> None:
    cfg = _cfg(f"data.cache={tmp_path}/cache/images", directory=folder)
    (tmp_path / "cache").mkdir()
    plan, data = _build(cfg)
    assert plan.cache and plan.pipeline["cache"] == f"{tmp_path}/cache/images"
    for _ in data.train.take(plan.steps_per_epoch + 1):
        pass
    assert any(p.name.startswith("images-train") for p in (tmp_path / "cache").iterdir())


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda root: root / "missing", "is not a directory; to make sample images"),
        (lambda root: root, "holds 0 images in 0 class folders"),
    ],
)
def test_an_unusable_directory_is_one_line(tmp_path: Path, make: Any, message: str) -> None:
    with pytest.raises(DistmonError, match=message) as err:
        open_source(_cfg(directory=make(tmp_path)))
    assert "\n" not in str(err.value)


def test_a_keras_application_trains_on_images_under_two_replicas(
    tf: Any, folder: Path, tmp_path: Path
) -> None:
    from distagent.train import run_job

    cfg = _cfg("train.steps_per_epoch=3", "train.epochs=1", "train.log_every_steps=3",
               f"run.logdir={tmp_path}", "run.name=images", directory=folder)
    assert run_job(cfg) == "finished"
    record = json.loads((tmp_path / "images" / "run.json").read_text())
    assert record["plan"]["replicas"] == 2 and record["last_step"] == 3
    assert np.isfinite(record["metrics"]["loss"])
    assert record["config"]["model"]["name"] == "MobileNetV2"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("sample_configs/tfrecord.toml",
         "python -m distagent.data.tfrecord sample_configs/quickstart.toml data/synthetic/train"),
        ("sample_configs/images.toml", "python -m distagent.data.samples demo_runs/images"),
    ],
)
def test_a_sample_without_its_files_says_how_to_make_them(tmp_path: Path, source: str,
                                                          message: str) -> None:
    import subprocess
    import sys

    config = Path(__file__).resolve().parents[2] / source
    done = subprocess.run([sys.executable, "-m", "distagent", "plan", str(config)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr


def test_the_plan_warns_when_the_decoded_images_would_not_fit_in_memory(folder: Path) -> None:
    from distagent.plan import make_plan, warning_kind

    cfg = _cfg(directory=folder)
    budget = 96 * (SIZE * SIZE * 3 + 4) - 1  # one byte short of the decoded set
    tight = make_plan(cfg, replicas=2, devices=("a", "b"), num_examples=96,
                      example_bytes=SIZE * SIZE * 3 + 4, cache_budget_bytes=budget)
    assert not tight.cache and "cache" in [warning_kind(w) for w in tight.warnings]
    assert any("data.cache to a file path" in w for w in tight.warnings)
    on_disk = make_plan(_cfg("data.cache=/tmp/x", directory=folder), replicas=2,
                        devices=("a", "b"), num_examples=96, example_bytes=SIZE * SIZE * 3 + 4,
                        cache_budget_bytes=budget)
    assert on_disk.cache and "cache" not in [warning_kind(w) for w in on_disk.warnings]


def test_images_made_in_chunks_keep_their_labels_and_shapes() -> None:
    """The command line makes the demo's images a chunk at a time (bounded memory, progress):
    the labels are the whole set's, each class as often, and one chunk is ring_images."""
    from distagent.data.samples import ring_chunks

    whole_images, whole_labels = ring_images(50, 5, 24, seed=3)
    chunks = list(ring_chunks(50, 5, 24, seed=3, chunk=16))
    assert [len(c[0]) for c in chunks] == [16, 16, 16, 2]
    labels = np.concatenate([c[1] for c in chunks])
    assert (labels == whole_labels).all() and np.bincount(labels).tolist() == [10] * 5
    assert all(c[0].shape[1:] == (24, 24, 3) and c[0].dtype == np.uint8 for c in chunks)
    one = next(ring_chunks(50, 5, 24, seed=3, chunk=50))
    assert (one[0] == whole_images).all()
