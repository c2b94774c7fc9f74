"""The GPU panel's memory cell: what a host or GPU reports, never a made-up zero."""

from __future__ import annotations

import pytest

from distmon.widgets.hosts import _memory


@pytest.mark.parametrize(
    ("used", "total", "shown"),
    [
        (30 * 1024.0, 80 * 1024.0, "30.0/80.0G"),
        (30 * 1024.0, None, "30.0G used"),  # a worker's samples record no total
        (None, None, "n/a"),  # a worker's host line without memory samples
        (None, 80 * 1024.0, "n/a/80.0G"),  # MIG: used unknown, total known
    ],
)
def test_memory_cell(used: float | None, total: float | None, shown: str) -> None:
    assert _memory(used, total) == shown
