"""`distmon --once` and cyclic gc: no collection while one pass over local sources reads and
reports (a local read makes no reference cycles: checked here on ../shared/wild and a sweep),
young ones only where remote clients read too, gc as it was after; and at the process's exit
what is still alive is frozen before the final collection, everything else exit does
unchanged."""

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

from distmon.once import one_pass_gc, run_once
from distmon.options import Options
from distmon.producers import ProducerSet, make_producers
from tests.core.events_helpers import WILD, require_wild

REPO = Path(__file__).resolve().parents[2]


def _write_runs(logdir: Path, runs: int) -> None:
    from tensorboardX import SummaryWriter

    for i in range(runs):
        with SummaryWriter(str(logdir / f"run-{i}")) as writer:
            for step in range(20):
                writer.add_scalar("loss", 1.0 / (step + 1), step)
            writer.add_hparams({"lr": 0.1 / (i + 1), "optimizer": "adam"}, {"best": 0.5})


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


def test_a_local_pass_runs_without_gc_and_leaves_it_as_it_was(
    tmp_path: Path, collections: list[int]
) -> None:
    _write_runs(tmp_path, 30)
    seen: list[bool] = []
    with one_pass_gc(remote=False, last=False):
        seen.append(gc.isenabled())
    assert seen == [False]
    out = io.StringIO()
    assert run_once(Options(logdirs=(tmp_path,), json=True, once=True, no_gpu=True), out) == 0
    assert len(json.loads(out.getvalue())["runs"]) == 60  # each run and its hparams sub-run
    assert gc.isenabled() and gc.get_threshold() == (50, 2, 2)
    assert gc.get_freeze_count() == 0  # this process goes on: nothing left uncollectable
    gc.disable()
    with one_pass_gc(remote=False, last=False):
        pass
    assert not gc.isenabled()  # as it was
    gc.enable()


def test_with_remote_clients_young_collections_still_free_their_cycles(
    collections: list[int],
) -> None:
    _only_new_objects()
    collections.clear()
    with one_pass_gc(remote=True, last=False):
        for _ in range(20_000):
            cycle: list[Any] = []
            cycle.append(cycle)
        assert gc.get_count()[0] < 50  # freed as they came
    assert 0 in collections and 1 in collections
    assert 2 not in collections
    assert gc.isenabled() and gc.get_threshold() == (50, 2, 2)


@pytest.mark.parametrize("source", ["wild", "sweep"])
def test_a_local_read_makes_no_reference_cycles(source: str, tmp_path: Path) -> None:
    """What running a local pass without gc rests on: every object the read makes is freed by
    its reference count or still in use."""
    if source == "wild":
        require_wild()  # skips, saying why, where ../shared is not beside the checkout
    root = WILD if source == "wild" else tmp_path
    if source == "sweep":
        _write_runs(tmp_path, 20)
    options = Options(logdirs=(root,), once=True, no_gpu=True)

    def read() -> tuple[ProducerSet, Any]:
        producers = ProducerSet(make_producers(options), options, logdirs=[str(root)])
        return producers, producers.read_once()

    read()  # the first imports what it needs (making a class makes cycles)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        producers, snap = read()
        gc.collect()
        garbage = [type(o).__qualname__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert len(snap.jobs) >= 20
    assert garbage == []
    producers.close()


EXITING = r"""
import atexit, gc, sys
# Registered before the CLI runs, so it runs at exit, after main() returned.
atexit.register(lambda: print(f"exit handlers ran; frozen: {gc.get_freeze_count() > 0}",
                              file=sys.stderr))
from distmon.cli import main
sys.argv[0] = "distmon"
code = main()  # the program itself, as the console script calls it
print(f"frozen after main: {gc.get_freeze_count() > 0}, gc enabled: {gc.isenabled()}",
      file=sys.stderr)
sys.exit(code)
"""


def test_the_program_freezes_what_its_pass_left_and_exits_as_usual(tmp_path: Path) -> None:
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
    assert len(json.loads(done.stdout)["runs"]) == 6  # all of it written and flushed
    assert "frozen after main: True, gc enabled: True" in done.stderr
    assert "exit handlers ran; frozen: True" in done.stderr


def test_a_caller_passing_argv_goes_on_with_nothing_frozen(tmp_path: Path) -> None:
    from distmon.cli import main

    _write_runs(tmp_path, 2)
    assert main(["--once", "--json", "--no-gpu", str(tmp_path)]) == 0
    assert gc.get_freeze_count() == 0 and gc.isenabled()
