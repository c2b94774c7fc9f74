"""The loop's profiling windows over a recording backend (the profiler's calls, in order) and a
real run directory: what opens when, what a request gets as its answer, and that nothing at all
starts where nothing asked."""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from distagent.schema import ProfileConfig
from distagent.train.profile_request import (
    REQUEST,
    Request,
    read_answer,
    take_request,
    write_request,
)
from distagent.train.profiling import Profiling
from distcore import names


class Recorder:
    """Writes a profile file at each stop, as TensorFlow's profiler does."""

    def __init__(self, fail_start: bool = False) -> None:
        self.calls: list[tuple[str, int]] = []
        self.logdir: Path | None = None
        self.fail_start = fail_start

    def start(self, logdir: str) -> None:
        if self.fail_start:
            raise RuntimeError("another profiler is running")
        self.logdir = Path(logdir)
        self.calls.append(("start", 0))

    def stop(self) -> None:
        assert self.logdir is not None
        folder = self.logdir / "plugins" / "profile" / f"2026_01_01_00_00_{len(self.calls):02d}"
        folder.mkdir(parents=True)
        (folder / "host.xplane.pb").write_bytes(b"x")
        self.calls.append(("stop", 0))

    def trace(self, step: int) -> AbstractContextManager[Any]:
        self.calls.append(("trace", step))
        return contextlib.nullcontext()


def drive(profiling: Profiling, total: int, *, log_every: int = 4,
          waits: dict[int, float] | None = None) -> None:
    """The loop's calls to it, one step per call."""
    for step in range(total):
        profiling.between(step)
        with profiling.trace(step):
            pass
        if (step + 1) % log_every == 0:
            profiling.logged(step + 1, (waits or {}).get(step + 1))
    profiling.close()


def traced(rec: Recorder) -> list[int]:
    return [step for call, step in rec.calls if call == "trace"]


@pytest.mark.parametrize(("window", "resumed_at", "expected"), [
    ((3, 6), 0, [3, 4, 5]),
    ((3, 6), 4, [4, 5]),  # resumed inside the window: what is left of it
    ((3, 6), 6, []),  # resumed past it
    ((10, 40), 0, list(range(10, 12))),  # the job ends first: written at the end
])
def test_a_configured_window_traces_its_steps(tmp_path: Path, window: tuple[int, int],
                                              resumed_at: int, expected: list[int]) -> None:
    rec = Recorder()
    profiling = Profiling(ProfileConfig(steps=window), run_dir=tmp_path, backend=rec)
    for step in range(resumed_at, 12):
        profiling.between(step)
        with profiling.trace(step):
            pass
    profiling.close()
    assert traced(rec) == expected
    assert profiling.starts == (1 if expected else 0)
    assert [c for c, _ in rec.calls].count("stop") == profiling.starts


def test_nothing_is_started_where_nothing_asked(tmp_path: Path) -> None:
    rec = Recorder()
    profiling = Profiling(ProfileConfig(), run_dir=tmp_path, backend=rec)
    drive(profiling, 40, waits={n: 0.9 for n in range(0, 41, 4)})  # input-bound, not asked
    assert rec.calls == [] and profiling.starts == 0
    off = Profiling()  # the loop's default
    drive(off, 8)
    assert off.between(3) == 0.0 and off.starts == 0


def test_a_request_profiles_the_next_steps_and_is_answered(tmp_path: Path) -> None:
    rec = Recorder()
    profiling = Profiling(ProfileConfig(), run_dir=tmp_path, backend=rec)
    write_request(tmp_path, Request("abc", 5))
    drive(profiling, 16)
    assert traced(rec) == [4, 5, 6, 7, 8]  # taken at the log point at 4
    assert not (tmp_path / REQUEST).exists()
    answer = read_answer(tmp_path, "abc")
    assert answer is not None and answer.error is None and answer.path is not None
    assert Path(answer.path).parent.parent.parent.parent == tmp_path / names.TRAIN_DIR
    assert read_answer(tmp_path, "other") is None


def test_a_request_the_profiler_refuses_is_answered_with_why(tmp_path: Path) -> None:
    said: list[str] = []
    profiling = Profiling(ProfileConfig(), run_dir=tmp_path, backend=Recorder(fail_start=True),
                          say=said.append)
    write_request(tmp_path, Request("abc", 2))
    drive(profiling, 12)
    answer = read_answer(tmp_path, "abc")
    assert answer is not None and answer.path is None
    assert answer.error == "the profiler did not start: another profiler is running"
    assert len(said) == 1 and profiling.starts == 0


@pytest.mark.parametrize(("doc", "why"), [
    (b'{"id": "a", "steps": 0}', "steps: expected an integer from 1 to"),
    (b'{"id": "a", "steps": true}', "steps: expected an integer"),
    (b'{"id": 3, "steps": 2}', "id: expected a string"),
    (b"[1]", "not a JSON object"),
    (b"{", "unreadable"),
    (b"x" * 10_000, "unreadable"),
])
def test_a_hostile_request_is_said_once_and_removed(tmp_path: Path, doc: bytes,
                                                    why: str) -> None:
    (tmp_path / REQUEST).write_bytes(doc)
    found = take_request(tmp_path)
    assert isinstance(found, str) and why in found
    assert not (tmp_path / REQUEST).exists() and take_request(tmp_path) is None


def test_input_bound_opens_one_window_per_interval(tmp_path: Path) -> None:
    now = [0.0]
    rec = Recorder()
    settings = ProfileConfig(on_input_bound=True, input_bound_steps=2, interval_minutes=1.0)
    profiling = Profiling(settings, run_dir=tmp_path, backend=rec, clock=lambda: now[0])
    below = names.INPUT_WAIT_HIGH - 0.01
    drive(profiling, 12, waits={4: below, 8: 0.5, 12: 0.5})
    assert traced(rec) == [8, 9]  # once: the second input-bound log point is too soon
    now[0] = 61.0
    profiling.logged(12, 0.5)
    profiling.between(12)
    with profiling.trace(12):
        pass
    profiling.close()
    assert traced(rec) == [8, 9, 12] and profiling.starts == 2
