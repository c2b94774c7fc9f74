"""The first walk begun in a forked child (discovery.prewalk, issue 20's first row): the walk it
hands over is the walk the process would have made, taken once, for the same roots only, never
stale, and its child is always waited for.

Each case runs in a fresh interpreter: a fork is refused while another thread runs, and a test
process may hold threads other tests left.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.test_events_discovery import TREES

SCRIPT = """
import json, os, sys, threading
from pathlib import Path
from distcore.events import discovery as d

roots, other, case = [Path(r) for r in json.loads(sys.argv[1])], Path(sys.argv[2]), sys.argv[3]
d._spare_cores = lambda: 0.0 if case == "busy" else 1.0  # a loaded test machine forks too
def walk(rs):
    problems = []
    runs = d.walk_runs(rs, problems, mtimes=True)
    return [list(r) for r in runs], problems
if case == "thread":
    hold = threading.Event()
    threading.Thread(target=hold.wait, daemon=True).start()
    print(json.dumps({"begun": d.prewalk(roots)}))
    hold.set()
    sys.exit()
if case == "stale":
    d.PREWALK_FRESH = 0.0
begun = d.prewalk(roots)
pid = d._prewalks[d._key(roots, os.getcwd())][0] if begun else None
out = {"begun": begun}
if case == "other":  # another walk, then one without mtimes: neither takes it
    out["other"] = walk([other])
    out["plain"] = [list(r) for r in d.walk_runs(roots)]
    out["pending"] = bool(d._prewalks)
out["taken"] = walk(roots)
out["pending_after"] = bool(d._prewalks)
out["again"] = walk(roots)  # walked here: the prewalk is taken once
try:
    os.waitpid(pid, os.WNOHANG)
    out["reaped"] = False
except (ChildProcessError, TypeError):  # ended and waited for; or never begun
    out["reaped"] = True
print(json.dumps(out))
"""


def _run(roots: list[Path], case: str, other: Path | None = None, cwd: Path | None = None) -> dict:
    args = [sys.executable, "-c", SCRIPT, json.dumps([str(r) for r in roots]), str(other), case]
    done = subprocess.run(args, capture_output=True, text=True, check=True, cwd=cwd)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("tree", TREES)
def test_the_walk_handed_over_is_the_walk_made_here(tmp_path: Path, tree: str) -> None:
    TREES[tree](tmp_path)
    out = _run([tmp_path], "taken")
    assert out["begun"]
    assert out["taken"] == out["again"]  # runs (names, spellings, files, mtimes) and problems
    assert out["taken"][0]  # there were runs to find
    assert not out["pending_after"] and out["reaped"]


def test_relative_roots_and_several(tmp_path: Path) -> None:
    for name in ("a", "b"):
        TREES["nested"](tmp_path / name)
    out = _run([Path("a"), Path("./b")], "taken", cwd=tmp_path)
    assert out["taken"] == out["again"] and out["begun"]
    assert {r[0] for r in out["taken"][0]} >= {"a/exp1/train", "b/exp1/train"}


def test_other_roots_and_plain_walks_walk_themselves(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "theirs").mkdir()
    TREES["nested"](tmp_path / "mine")
    TREES["specials"](tmp_path / "theirs")
    out = _run([tmp_path / "mine"], "other", other=tmp_path / "theirs")
    assert {r[0] for r in out["other"][0]} == {"x.tfevents.dir", "plain-file-run"}
    assert {r[0] for r in out["plain"]} == {".", "exp1/train", "exp1/validation"}
    assert out["pending"]  # still there for the walk it was begun for
    assert out["taken"] == out["again"] and out["reaped"]


def test_a_stale_prewalk_is_not_taken_and_its_child_is_ended(tmp_path: Path) -> None:
    TREES["links"](tmp_path)
    out = _run([tmp_path], "stale")
    assert out["begun"] and out["taken"] == out["again"]
    assert not out["pending_after"] and out["reaped"]


def test_no_fork_while_another_thread_runs(tmp_path: Path) -> None:
    assert _run([tmp_path], "thread") == {"begun": False}


def test_no_fork_without_a_spare_core(tmp_path: Path) -> None:
    TREES["nested"](tmp_path)
    out = _run([tmp_path], "busy")
    assert not out["begun"] and out["taken"] == out["again"] and out["taken"][0]
