"""Fixtures for the core tests: `decoder_path` runs a test once on the compiled kernel of the
event decoder and once on its reference path in plain Python (distcore/tfrecord/kernel.py)."""

from __future__ import annotations

import os
from types import ModuleType

import pytest

import distcore.tfrecord.kernel as kernel

KERNEL_MISSING = "the C kernel is not built (pip install -e . builds it with gcc and Python.h)"


def compiled_kernel() -> ModuleType:
    """The kernel, or a skip saying how to build it (a failure where CI requires it)."""
    compiled = kernel._load()
    if compiled is None:
        if os.environ.get("DISTMON_REQUIRE_KERNEL"):
            pytest.fail(KERNEL_MISSING)
        pytest.skip(KERNEL_MISSING)
    return compiled


@pytest.fixture(params=["compiled", "reference"])
def decoder_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    compiled = compiled_kernel() if request.param == "compiled" else None
    monkeypatch.setattr(kernel, "ACTIVE", compiled)
    return str(request.param)
