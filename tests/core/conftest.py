"""Fixtures for the core tests: `decoder_path` runs a test once on the compiled kernel of the
event decoder and once on its reference path in plain Python (distcore/tfrecord/kernel.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

import pytest


def _load_test_kernel(path: str) -> None:
    """DISTMON_TEST_KERNEL: the kernel is this build (the sanitized one of
    test_tfrecord_sanitized.py), loaded in place of the installed one before the decoder looks."""
    spec = importlib.util.spec_from_file_location("distcore.tfrecord._kernel", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[spec.name] = module


if os.environ.get("DISTMON_TEST_KERNEL"):
    _load_test_kernel(os.environ["DISTMON_TEST_KERNEL"])

import distcore.tfrecord.kernel as kernel  # noqa: E402  (after the test kernel, if any)

if os.environ.get("DISTMON_TEST_KERNEL"):  # a failed load must not pass as a kernel run
    assert kernel.ACTIVE is not None
    assert kernel.ACTIVE.__file__ == os.environ["DISTMON_TEST_KERNEL"], kernel.ACTIVE.__file__

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
