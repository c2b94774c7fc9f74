"""Test plumbing shared by every test folder.

- `tf`: TensorFlow, with the CPU split into CPU_REPLICAS logical devices *before* the runtime
  initialises (it cannot be changed afterwards). Tests never import tensorflow at module level:
  they take this fixture, so that whichever test touches TensorFlow first configures it; every
  test under tests/agent gets the same split before it runs.
- `gpu` marker: skipped unless NVML finds a GPU.
- The files run heaviest first (tests/kit/order.py), so that the test processes end together.
- A thread-leak guard: a test that leaves Python threads running fails.
- Hypothesis profiles: `default` draws the same examples on every run (seeded by each test), so
  `make test` and CI agree on what they tried and a red run reproduces; `hunt` (`make hunt`)
  draws fresh random examples, ten times as many, to look for new failures. A failure either
  finds is kept as an `@example` on its test.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.kit import order
from tests.kit.wait import WaitTimeout, wait_until

# The kit's fixtures (tests/kit): one sshd, one webhook receiver, for every folder.
pytest_plugins = ["tests.kit.sshd", "tests.kit.webhook"]

settings.register_profile("default", derandomize=True, print_blob=True)
settings.register_profile("hunt", derandomize=False, max_examples=1000, print_blob=True)
settings.load_profile(os.environ.get("DISTMON_HYPOTHESIS", "default"))

CPU_REPLICAS = 4
# TensorFlow's PreemptionCheckpointHandler asks the GCP metadata server whether it runs on GCP
# (metadata.google.internal, 5 s timeout). Tests, and the worker processes they start, must send
# nothing off this machine: point it at a closed loopback port, which refuses at once.
os.environ.setdefault("GCE_METADATA_IP", "127.0.0.1:9")
# distagent keeps a CPU's measured peak in the user's cache (distagent.cpu_peak): the tests and
# the jobs they start share one of their own, removed at the end.
if "DISTMON_CACHE_DIR" not in os.environ:
    os.environ["DISTMON_CACHE_DIR"] = tempfile.mkdtemp(prefix="distmon-test-cache-")
    atexit.register(shutil.rmtree, os.environ["DISTMON_CACHE_DIR"], ignore_errors=True)
# Threads that libraries start once per process and keep by design.
_PERSISTENT_THREAD_PREFIXES = ("asyncio_", "ThreadPoolExecutor", "pydevd", "Dummy-", "fsspecIO")


def configure_tensorflow(replicas: int = CPU_REPLICAS) -> Any:
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    # RuntimeError: already initialised (by this function, earlier): keep what is there.
    with contextlib.suppress(RuntimeError):
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(replicas)]
        )
    # Start the runtime now: a split only set can still be replaced, and a test that resolves
    # a strategy of 2 CPU replicas first would leave the rest of the process with 2 devices.
    tf.config.list_logical_devices("CPU")
    return tf


@pytest.fixture(scope="session")
def tf() -> Any:
    return configure_tensorflow()


@pytest.fixture(scope="session")
def cpu_devices(tf: Any) -> list[str]:
    """Names of the logical CPU devices, e.g. ['/device:CPU:0', ..., '/device:CPU:3']."""
    return [d.name for d in tf.config.list_logical_devices("CPU")]


def _nvml_has_gpu() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return bool(pynvml.nvmlDeviceGetCount() > 0)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return False


def pytest_configure(config: pytest.Config) -> None:
    order.configure(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    order.heaviest_first(items, order.known_seconds())
    if not any(item.get_closest_marker("gpu") for item in items) or _nvml_has_gpu():
        return
    skip = pytest.mark.skip(
        reason="no NVIDIA GPU found through NVML (runs on a host with a GPU and its driver)")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Every agent test runs in a TensorFlow split into CPU_REPLICAS devices, whichever test of
    this process came first: a test that resolves a strategy without the `tf` fixture would
    otherwise start TensorFlow with its own count, and under pytest-xdist the files a worker
    runs first differ from run to run."""
    if _AGENT_TESTS in item.path.parents:
        configure_tensorflow()


_AGENT_TESTS = Path(__file__).resolve().parent / "agent"


def _ours(threads: set[threading.Thread]) -> set[threading.Thread]:
    return {
        t for t in threads if t.is_alive() and not t.name.startswith(_PERSISTENT_THREAD_PREFIXES)
    }


@pytest.fixture(autouse=True)
def no_thread_leaks() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    # 30 s bounds a failure only: a loaded machine joins late.
    with contextlib.suppress(WaitTimeout):
        wait_until(lambda: not _ours(set(threading.enumerate()) - before), "threads joined", 30)
    leaked = _ours(set(threading.enumerate()) - before)
    assert not leaked, f"test leaked threads: {sorted(t.name for t in leaked)}"
