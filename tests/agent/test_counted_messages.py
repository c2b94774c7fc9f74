"""The agent's messages that count something say "1 replica", "2 replicas" (never "1 replicas"
or "replica(s)"): each message's own function, at one and at many. The images warning is also
checked through the real listing, plan and pipeline (test_images_safety's explicit example)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from distagent.commands.scale import scale_notes
from distagent.data.images import Listing, skipped_warning
from distagent.plan import provenance, shard_policy
from distagent.train.recovery import Recovery


def _skipped(count: int) -> str | None:
    listing = Listing([], [], [], tuple(f"/d/c/{i}.jpg (empty)" for i in range(min(count, 2))),
                      count)
    return skipped_warning(listing)


def _recovery(batches: int) -> str:
    return Recovery(step=9, loss=math.inf, reason="inf", lr_before=0.1, lr_after=0.05,
                    restored_step=5, skipped_batches=batches).message(1, 3)


CASES: list[tuple[Callable[[], object], str]] = [
    (lambda: _skipped(1), '1 unreadable image skipped (data.images.on_error = "skip"): '),
    (lambda: _skipped(3), "3 unreadable images skipped"),
    (lambda: _skipped(3), " and 1 more"),
    (lambda: shard_policy("tfrecord", 1, 2)[1][0], "only 1 TFRecord file for 2 workers"),
    (lambda: shard_policy("tfrecord", 3, 4)[1][0], "only 3 TFRecord files for 4 workers"),
    (lambda: shard_policy("tfrecord", None, 2)[1][0], "an unknown number of TFRecord files"),
    (lambda: provenance(0.01, 32, 32, 1, "linear", 0.01), "batch 32 × 1 replica (linear)"),
    (lambda: provenance(0.01, 32, 32, 4, "linear", 0.04), "batch 32 × 4 replicas (linear)"),
    (lambda: provenance(0.01, 16, 32, 1, "linear", 0.02), "(32 × 1 replica)"),
    (lambda: _recovery(1), "skipping 1 batch (recovery 1 of 3)"),
    (lambda: _recovery(2), "skipping 2 batches (recovery 1 of 3)"),
    (lambda: scale_notes("CPU", [{"replicas": 2, "input_wait_fraction": 0.0}], 1)[0],
     "on the same 1 CPU core: they share"),
    (lambda: scale_notes("CPU", [{"replicas": 2, "input_wait_fraction": 0.0}], 2)[0],
     "on the same 2 CPU cores: they share"),
]


@pytest.mark.parametrize(("message", "expected"), CASES)
def test_counts_agree_with_their_number(message: Callable[[], object], expected: str) -> None:
    text = message()
    assert isinstance(text, str) and expected in text, text


@pytest.mark.parametrize("count", [1, 2, 7])
def test_warning_kinds_are_found_at_one_and_at_many(count: int) -> None:
    from distagent.plan import warning_kind

    assert warning_kind(_skipped(count) or "") == "skipped_images"
    assert warning_kind(shard_policy("tfrecord", count, 8)[1][0]) == "few_files"
