"""The loss/accuracy tag names of common writers are recognised, and the plainest one picked."""

from __future__ import annotations

import pytest

from distcore.tags import pick_tag, tag_kind


@pytest.mark.parametrize(
    ("tag", "kind"),
    [
        ("loss", "loss"),
        ("epoch_loss", "loss"),
        ("batch_loss", "loss"),
        ("train/loss", "loss"),
        ("Loss/train", "loss"),
        ("val_loss", "loss"),
        ("evaluation_loss_vs_iterations", "loss"),
        ("accuracy", "accuracy"),
        ("acc", "accuracy"),
        ("val_acc", "accuracy"),
        ("epoch_accuracy", "accuracy"),
        ("sparse_categorical_accuracy", "accuracy"),
        ("Accuracy/test", "accuracy"),
        ("train/top1", "accuracy"),
        ("learning_rate", None),
        ("loss_scale", None),
        ("perf/input_wait_fraction", None),
        ("gpu/0/utilization", None),
        ("accumulator", None),
        ("lossy", None),
    ],
)
def test_tag_kind(tag: str, kind: str | None) -> None:
    assert tag_kind(tag) == kind


@pytest.mark.parametrize(
    ("tags", "kind", "expected"),
    [
        (["epoch_loss", "loss", "learning_rate"], "loss", "loss"),
        (["val_loss", "loss"], "loss", "loss"),
        (["Loss/test", "Loss/train"], "loss", "Loss/train"),
        (["epoch_accuracy", "epoch_loss"], "accuracy", "epoch_accuracy"),
        (
            ["sparse_categorical_accuracy", "val_sparse_categorical_accuracy"],
            "accuracy",
            "sparse_categorical_accuracy",
        ),
        (["learning_rate"], "loss", None),
        ([], "accuracy", None),
    ],
)
def test_pick_tag(tags: list[str], kind: str, expected: str | None) -> None:
    assert pick_tag(tags, kind) == expected  # type: ignore[arg-type]
