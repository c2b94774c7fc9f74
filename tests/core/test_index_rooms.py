"""The job index's pure rooms: incremental grouping (parts.regroup, against group_runs as its
oracle), the run.json rotation (agent.due_checks) and the gathering from producers (inputs)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcore.events.snapshots import RunSnapshot
from distcore.jobs import agent
from distcore.jobs.inputs import errors_of, problems_of, remote_hosts
from distcore.jobs.parts import Grouping, group_runs, regroup
from distcore.jobs.snapshots import Host
from distcore.location import RunLocation
from distcore.producer import ProducerError

NAMES = ["a", "a/train", "a/validation", "a/system", "a/system/worker-1", "b", "b/train",
         "c/1712345678.123456", "c", "z/train", "z/system/worker-0"]  # fmt: skip


def _run(name: str, version: int) -> RunSnapshot:
    return RunSnapshot(name=name, path=RunLocation.on_this_machine(f"/logs/{name}"),
                       status="live", files=1, problems=(), hparams={}, scalars={},
                       last_update=None, version=version)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sets(st.sampled_from(NAMES)), st.sets(st.sampled_from(NAMES))),
                min_size=1, max_size=6))  # fmt: skip
def test_regroup_is_group_runs_however_the_runs_come_and_go(
    steps: list[tuple[set[str], set[str]]],
) -> None:
    """Each step: the runs there now, and those of them that changed (new objects)."""
    grouping, kept = Grouping(), dict[str, RunSnapshot]()
    for version, (present, changed) in enumerate(steps):
        kept = {n: (_run(n, version) if n in changed or n not in kept else kept[n])
                for n in sorted(present)}  # fmt: skip
        runs = tuple(kept.values())
        before = {job: dict(parts) for job, parts in grouping.jobs.items()}
        touched = regroup(grouping, runs)
        expected = group_runs(runs)
        assert grouping.jobs == expected
        assert list(grouping.jobs) == list(expected)  # jobs in order, parts too
        assert all(list(grouping.jobs[j]) == list(expected[j]) for j in expected)
        moved = {j for j in before.keys() | expected.keys() if before.get(j) != expected.get(j)}
        assert moved <= touched
        assert regroup(grouping, runs) == set()  # the same tuple again: nothing to do


@pytest.mark.parametrize(
    ("jobs", "cursor", "always", "live", "due", "next_cursor"),
    [
        ([], 0, set(), set(), set(), 0),
        (["a", "b", "c", "d"], 0, set(), set(), {"a", "b"}, 2),  # a share of 2 (patched)
        (["a", "b", "c", "d"], 2, set(), set(), {"c", "d"}, 4),
        (["a", "b", "c", "d"], 3, set(), set(), {"d", "a"}, 5),  # round the end
        (["a", "b", "c", "d"], 4, {"c"}, set(), {"a", "b", "c"}, 2),  # always looked at
        (["a", "b", "c", "d"], 0, set(), {"d"}, {"a", "b", "d"}, 2),  # few live: all of them
        (["a", "b", "c", "d"], 0, set(), {"b", "c", "d"}, {"a", "b"}, 2),  # many: a share
    ],
)
def test_due_checks_rotate_through_the_jobs(
    monkeypatch: pytest.MonkeyPatch, jobs: list[str], cursor: int, always: set[str],
    live: set[str], due: set[str], next_cursor: int,
) -> None:
    monkeypatch.setattr(agent, "AGENT_CHECK_MIN", 2)
    monkeypatch.setattr(agent, "AGENT_CHECK_SHARE", 10)
    assert agent.due_checks(jobs, cursor, always, live) == (due, next_cursor)


class _Producer:
    def __init__(self, errors: object = (), problems: object = ()) -> None:
        self._errors, self._problems = errors, problems

    def start(self) -> None: ...
    def close(self) -> None: ...

    def errors(self) -> tuple[ProducerError, ...]:
        if isinstance(self._errors, Exception):
            raise self._errors
        return self._errors  # type: ignore[return-value]

    def problems(self) -> tuple[str, ...]:
        if isinstance(self._problems, Exception):
            raise self._problems
        return self._problems  # type: ignore[return-value]

    def hosts(self) -> tuple[Host, ...]:
        raise ConnectionError("host unreachable")


def test_a_producer_that_fails_to_answer_is_one_more_line_in_order() -> None:
    failing = ProducerError("watcher", "OSError: gone", 1.0)
    producers = [_Producer([failing], ["/x: not a regular file"]),
                 _Producer(RuntimeError("bug"), RuntimeError("bug too")), _Producer()]  # fmt: skip
    errors = errors_of(producers)
    assert errors[0] == failing and len(errors) == 2
    assert errors[1].producer == "_Producer" and errors[1].message == "errors() failed: bug"
    assert problems_of(producers) == ("/x: not a regular file",
                                      "_Producer: problems() failed: bug too")  # fmt: skip
    [host] = remote_hosts([_Producer()])
    assert (host.key, host.name, host.error) == ("error:_Producer", "_Producer", "host unreachable")
