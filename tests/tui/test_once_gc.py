"""`distmon --once` and cyclic gc: no full collection while the one pass reads and reports,
young ones as usual, the thresholds as they were after; and at the process's exit what is
still alive is frozen before the final collection, everything else exit does unchanged."""

from __future__ import annotations

import gc
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distmon.once import run_once
from distmon.options import Options

REPO = Path(__file__).resolve().parents[2]


def _write_runs(logdir: Path, runs: int) -> None:
    from tensorboardX import SummaryWriter

    for i in range(runs):
        with SummaryWriter(str(logdir / f"run-{i}")) as writer:
            for step in range(20):
                writer.add_scalar("loss", 1.0 / (step + 1), step)


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every collection gc starts, with thresholds that make it start many
    (a full one every few young ones), restored after (and what `_only_new_objects` froze)."""
    started: list[int] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(info["generation"])

    thresholds = gc.get_threshold()
    gc.set_threshold(50, 2, 2)
    gc.callbacks.append(note)
    try:
        yield started
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _only_new_objects() -> None:
    """gc skips a full collection until the objects new since the last one are a quarter of
    those it would walk: freeze the test process's own (pytest's, tensorboardX's), so that the
    pass's would be due one, and count from zero."""
    gc.freeze()
    gc.collect()


def test_the_pass_starts_young_collections_only_and_restores_the_thresholds(
    tmp_path: Path, collections: list[int]
) -> None:
    _write_runs(tmp_path, 30)
    _only_new_objects()
    collections.clear()
    out = io.StringIO()
    assert run_once(Options(logdirs=(tmp_path,), json=True, once=True, no_gpu=True), out) == 0
    during = list(collections)
    assert 0 in during and 1 in during  # short-lived cycles are still freed
    assert 2 not in during
    assert len(json.loads(out.getvalue())["runs"]) == 30
    assert gc.get_threshold() == (50, 2, 2)
    gc.collect()  # a full collection as the thresholds ask, outside the pass
    assert 2 in collections


EXITING = r"""
import atexit, gc, sys
# Registered first, so it runs last: after the report's own exit handler.
atexit.register(lambda: print(f"frozen at exit: {gc.get_freeze_count() > 0}", file=sys.stderr))
from distmon.cli import main
code = main(sys.argv[1:])
print(f"frozen before exit: {gc.get_freeze_count() > 0}", file=sys.stderr)
sys.exit(code)
"""


def test_the_process_exits_as_usual_with_its_objects_frozen(tmp_path: Path) -> None:
    _write_runs(tmp_path, 3)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(REPO / part) for part in ("shared", "agent", "tui")),
    }
    done = subprocess.run(
        [sys.executable, "-c", EXITING, "--once", "--json", "--no-gpu", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["runs"]) == 3  # all of it written and flushed
    assert "frozen before exit: False" in done.stderr
    assert "frozen at exit: True" in done.stderr  # the other exit handlers still ran
