"""The producer kit: the loop's ticks on an injected clock, wake-ups, backoff, "failing since"."""

from __future__ import annotations

import errno
import logging
import resource
import threading

import pytest

from distcore.errors import descriptor_shortage
from distcore.producer import Failing, Loop, backoff, next_deadline, paced


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_loop(costs: list[float | Exception], **kwargs: object) -> tuple[list[float], list[float]]:
    """Runs the real loop thread on fake time, one step per entry of `costs` (the seconds the
    step takes, or the exception it raises); returns (the step start times, the waits)."""
    clock = FakeClock()
    starts: list[float] = []
    waits: list[float] = []
    remaining = list(costs)

    def step() -> None:
        starts.append(clock.now)
        cost = remaining.pop(0)
        if isinstance(cost, Exception):
            raise cost
        clock.now += cost

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        clock.now += seconds
        return not remaining

    loop = Loop("test-loop", step, clock=clock, wait=wait, **kwargs)  # type: ignore[arg-type]
    loop.start()
    loop.join(5.0)
    loop.close()
    return starts, waits


@pytest.mark.parametrize(
    ("costs", "interval", "starts"),
    [
        ([0.3] * 5, 1.0, [0.0, 1.0, 2.0, 3.0, 4.0]),  # slow steps do not push the grid back
        ([0.0, 2.5, 0.0], 1.0, [0.0, 1.0, 4.0]),  # a stall skips the missed ticks, no burst
        ([0.1, 0.1, 0.1], 0.5, [0.0, 0.5, 1.0]),
        ([1.0, 1.0], 1.0, [0.0, 2.0]),  # exactly one interval: the due tick is skipped
    ],
)
def test_ticks_are_drift_free(costs: list[float], interval: float, starts: list[float]) -> None:
    assert run_loop(list(costs), interval=interval)[0] == pytest.approx(starts)


@pytest.mark.parametrize(
    ("costs", "max_backoff", "starts"),
    [
        # Without backoff a failing step keeps the grid.
        ([RuntimeError("x"), RuntimeError("x"), 0.0, 0.0], None, [0.0, 1.0, 2.0, 3.0]),
        # With it: 1, 2, 4 s after failures in a row, then back on a grid after a success.
        ([RuntimeError("x")] * 3 + [0.0, 0.0], 10.0, [0.0, 1.0, 3.0, 7.0, 8.0]),
        ([RuntimeError("x")] * 4 + [0.0], 3.0, [0.0, 1.0, 3.0, 6.0, 9.0]),  # capped
    ],
)
def test_backoff_after_failures(
    costs: list[float | Exception], max_backoff: float | None, starts: list[float]
) -> None:
    seen: list[str] = []
    found, _ = run_loop(costs, interval=1.0, max_backoff=max_backoff,
                        on_error=lambda err: seen.append(str(err)))
    assert found == pytest.approx(starts)
    assert seen == [str(c) for c in costs if isinstance(c, Exception)]


@pytest.mark.parametrize(
    ("failures", "interval", "limit", "expected"),
    [(0, 1.0, 30.0, 1.0), (1, 1.0, 30.0, 1.0), (2, 1.0, 30.0, 2.0), (6, 1.0, 30.0, 30.0),
     (10_000, 2.0, 30.0, 30.0), (3, 60.0, 30.0, 60.0)],
)
def test_backoff(failures: int, interval: float, limit: float, expected: float) -> None:
    assert backoff(failures, interval, limit) == expected


@pytest.mark.parametrize(
    ("ended", "took", "share", "wanted"),
    [
        (10.0, 0.0, 0.25, 10.0),  # free: at once
        (10.0, 0.1, 0.25, 10.3),  # a quarter of the time: 0.1 working, 0.3 waiting
        (10.0, 0.1, 0.5, 10.1),
        (10.0, 0.5, 1.0, 10.0),  # all of it: never waits
        (10.0, 60.0, 0.25, 14.0),  # never further behind than the cap
    ],
)
def test_paced(ended: float, took: float, share: float, wanted: float) -> None:
    assert paced(ended, took, share, 4.0) == pytest.approx(wanted)


def test_next_deadline_is_the_next_grid_point() -> None:
    assert next_deadline(10.0, 12.5, 1.0) == pytest.approx(13.0)


@pytest.mark.parametrize(
    ("restart", "events", "expected"),
    [
        (False, [("a", 1.0), ("b", 2.0)], ("b", 1.0)),  # one failure going on: since stays
        (True, [("a", 1.0), ("a", 2.0)], ("a", 1.0)),
        (True, [("a", 1.0), ("b", 2.0)], ("b", 2.0)),  # a new message is a new failure
        (False, [("a", 1.0), None, ("b", 3.0)], ("b", 3.0)),  # ok() ends it
        (False, [("a", 1.0), None], None),
    ],
)
def test_failing_since(
    restart: bool, events: list[tuple[str, float] | None], expected: tuple[str, float] | None
) -> None:
    failing = Failing("slurm", restart_on_change=restart)
    for event in events:
        if event is None:
            failing.ok()
        else:
            failing.fail(*event)
    got = [(e.message, e.since) for e in failing.errors()]
    assert got == ([expected] if expected else [])
    assert all(e.producer == "slurm" for e in failing.errors())


def test_wake_runs_the_step_early_and_close_is_prompt() -> None:
    ran = threading.Semaphore(0)
    loop = Loop("test-wake", ran.release, interval=3600.0)
    loop.start()
    try:
        assert ran.acquire(timeout=10.0)  # the first tick at once
        loop.wake()
        assert ran.acquire(timeout=10.0)  # long before the hour
    finally:
        loop.close()
    assert not any(t.name == "test-wake" for t in threading.enumerate())
    with pytest.raises(RuntimeError, match="already started"):
        loop.start()


def test_a_step_that_raises_never_ends_the_thread() -> None:
    calls = threading.Semaphore(0)

    def step() -> None:
        calls.release()
        raise ValueError("bug")

    def on_error(err: Exception) -> None:
        raise ZeroDivisionError("a handler with its own bug")

    loop = Loop("test-raise", step, interval=0.01, on_error=on_error)
    loop.start()
    try:
        for _ in range(3):
            assert calls.acquire(timeout=10.0)
    finally:
        loop.close()


def test_a_step_paces_itself_with_next_in() -> None:
    """`next_in` sets the next wait alone (a costly pass spaces itself out, a missing tool is
    asked for again later), also from on_error and instead of the backoff."""
    clock = FakeClock()
    starts: list[float] = []
    plan: list[tuple[float, float | None, bool]] = [  # (cost, next_in, raise)
        (0.5, 5.0, False), (0.0, None, False), (0.0, 60.0, True), (0.0, None, True),
        (0.0, None, False),
    ]  # fmt: skip
    loop: Loop

    def step() -> None:
        starts.append(clock.now)
        cost, pace, fail = plan.pop(0)
        clock.now += cost
        if pace is not None and not fail:
            loop.next_in(pace)
        if fail:
            raise RuntimeError(str(pace))

    def on_error(err: Exception) -> None:
        if str(err) != "None":
            loop.next_in(float(str(err)))

    def wait(seconds: float) -> bool:
        clock.now += seconds
        return not plan

    loop = Loop("test-pace", step, interval=1.0, clock=clock, wait=wait, on_error=on_error,
                max_backoff=30.0)
    loop.start()
    loop.join(5.0)
    loop.close()
    # 0.5 + 5 s; then the grid from there (+1); 60 s asked by on_error; then the 2nd failure
    # in a row backs off 2 s.
    assert starts == pytest.approx([0.0, 5.5, 6.5, 66.5, 68.5])


def test_failures_count_the_one_on_error_is_handed() -> None:
    seen: list[int] = []
    loop: Loop
    results = [RuntimeError("a"), RuntimeError("b"), None, RuntimeError("c")]

    def step() -> None:
        result = results.pop(0)
        if result is not None:
            raise result

    loop = Loop("test-count", step, interval=1.0, on_error=lambda err: seen.append(loop.failures),
                wait=lambda seconds: not results)
    loop.start()
    loop.join(5.0)
    loop.close()
    assert seen == [1, 2, 1]


def test_sleep_ignores_wakes_and_ends_at_close() -> None:
    """A step's pause (a debounce, a coalescing wait) is cut short by close, not by wake."""
    inside = threading.Event()
    slept: list[bool] = []

    def step() -> None:
        inside.set()
        slept.append(loop.sleep(3600.0))

    loop = Loop("test-sleep", step, interval=3600.0)
    loop.start()
    try:
        assert inside.wait(10.0)
        loop.wake()
        assert not slept  # still asleep: a wake does not end the pause
    finally:
        loop.close()
    assert slept == [True]
    assert loop.started and loop.stopping and loop.stop_event.is_set()


@pytest.mark.parametrize(("err", "said"), [
    (OSError(errno.EMFILE, "Too many open files", "/some/module.py"),
     "Too many open files (at this process's limit of {limit}: ulimit -n)"),
    (OSError(errno.ENFILE, "Too many open files in system"),
     "Too many open files in system (the system's limit, fs.file-max)"),
    (OSError(errno.ENOENT, "No such file"), None),
    (RuntimeError("a bug"), None),
])
def test_descriptor_shortage(err: Exception, said: str | None) -> None:
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert descriptor_shortage(err) == (said.format(limit=limit) if said else None)


@pytest.mark.parametrize(("err", "traceback"), [
    (OSError(errno.EMFILE, "Too many open files", "/some/module.py"), False),
    (RuntimeError("a bug"), True),
])
def test_a_step_out_of_descriptors_logs_one_line_a_bug_its_traceback(
        err: Exception, traceback: bool, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="distcore.producer"):
        run_loop([err, 0.0], interval=1.0)
    (record,) = caplog.records
    assert (record.exc_info is not None) is traceback
    assert "/some/module.py" not in record.getMessage()
