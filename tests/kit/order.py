"""The test files, heaviest first, so that `make test`'s processes end together.

pytest-xdist hands each process whole files (--dist loadfile), in collection order under
--no-loadscope-reorder (by default it orders them by their number of tests, which sent the few
slow files, a Slurm job or a TensorFlow job each, last, to run while the other processes
sat idle). This orders the files by the seconds they took, as tests/durations.json holds
them: longest first, the greedy way to share jobs of known length between machines. A file
it does not know runs after those it does, in collection order: stale figures cost minutes,
never a test.

`make durations` writes the file again from a whole run (DISTMON_RECORD_DURATIONS names it):
each file's setup, call and teardown seconds, summed by the controlling process.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
RECORD_ENV = "DISTMON_RECORD_DURATIONS"


def known_seconds(path: Path = DURATIONS) -> dict[str, float]:
    """{file relative to the repository: seconds}; nothing when the file is missing or bad."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {k: float(v) for k, v in doc.items() if isinstance(v, (int, float))}


def heaviest_first(items: list[pytest.Item], seconds: dict[str, float]) -> None:
    """Sort `items` in place: files by their known seconds, longest first; unknown files after,
    in the order they came; each file's tests keep their order."""
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(_file_of(item), index)
    items.sort(key=lambda item: (-seconds.get(_file_of(item), -1.0), first[_file_of(item)]))


def _file_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


class Recorder:
    """Sums each file's seconds from the test reports; written at the session's end by the
    process that has them all (xdist's controller, or pytest alone)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.spent: defaultdict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.spent[report.nodeid.split("::", 1)[0]] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(session.config, "workerinput"):
            return
        ordered = {f: round(s, 1) for f, s in sorted(self.spent.items(), key=lambda fs: -fs[1])}
        self.out.write_text(json.dumps(ordered, indent=1) + "\n")


def configure(config: pytest.Config) -> None:
    """Registers the recorder when RECORD_ENV names the file to write."""
    out = os.environ.get(RECORD_ENV)
    if out and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Recorder(Path(out)), "distmon-durations")
