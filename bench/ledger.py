"""What a job's own instrumentation costs per step, and how much wall time the ledger leaves
`unknown`.

The same job (quickstart's small MLP on 2 CPU replicas, a log point every 10 steps, a
checkpoint every 100) runs instrumented (as every job runs) and bare (DISTAGENT_BENCH_BARE=1,
distagent.train.bare: no in-graph timestamps, no heartbeat, no ledger, no system samplers),
alternating, `--runs` times each. A run's time per step is from the first log point
(compilation done) to the last step, taken by the step hook that runs after every compiled
call; the ratio is of the two medians. Target: at most 1.01. On a shared machine runs differ
by more than that, so the ledger's part is also measured from inside: the seconds spent in the
clock's own calls during the instrumented runs, per step, plus the ledger's `time/` tags in a
log point's compiled write (the same write with and without them, alternating, medians) over
the log interval. The unknown share is the ledger's own figure, `unknown` over the job's wall,
median of the instrumented runs. Target: at most 5%.

    .venv/bin/python bench/ledger.py [--runs 5] [--steps 600]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "shared"), str(ROOT / "agent")]
LOG_EVERY = 10
CHECKPOINT_EVERY = 100


def _config(logdir: Path, name: str, steps: int) -> Any:
    from distagent.config import load_config

    settings = {
        "run.logdir": str(logdir), "run.name": name, "strategy.cpu_replicas": 2,
        "data.per_replica_batch_size": 32, "data.validation_fraction": 0.0,
        "data.synthetic.num_examples": steps * 64, "train.epochs": 1,
        "train.log_every_steps": LOG_EVERY, "train.checkpoint_every_steps": CHECKPOINT_EVERY,
        "model.hidden_units": "[128, 64]",
    }
    overrides = [f"{key}={value}" for key, value in settings.items()]
    return load_config(ROOT / "sample_configs" / "quickstart.toml", overrides)


@contextlib.contextmanager
def _bare(on: bool) -> Iterator[None]:
    """The benchmarks' switch in this process's environment, as a job's own would hold it."""
    from distagent.train.bare import BARE_ENV

    before = os.environ.pop(BARE_ENV, None)
    if on:
        os.environ[BARE_ENV] = "1"
    try:
        yield
    finally:
        os.environ.pop(BARE_ENV, None)
        if before is not None:
            os.environ[BARE_ENV] = before


SPENT = [0.0]  # seconds inside the clock's calls, in the runs with the ledger


@contextlib.contextmanager
def _timed_ledger() -> Iterator[None]:
    """The real clock, with the seconds spent in its calls added to SPENT."""
    import distagent.train.watchers as job
    from distagent.train.ledger import AttemptClock

    def timed(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                SPENT[0] += time.perf_counter() - start
        return call

    class Timed(AttemptClock):
        switch = timed(AttemptClock.switch)
        steps_logged = timed(AttemptClock.steps_logged)
        checkpointed = timed(AttemptClock.checkpointed)
        save = timed(AttemptClock.save)
        scalars = timed(AttemptClock.scalars)

    real = job.start_clock

    def start(*args: Any, **kwargs: Any) -> AttemptClock:
        clock = real(*args, **kwargs)
        clock.__class__ = Timed
        return clock

    job.start_clock = start
    try:
        yield
    finally:
        job.start_clock = real


def _tags_cost(calls: int = 200, rounds: int = 5) -> float:
    """Seconds the ledger's tags add to one log point's compiled write (medians), on the
    writing thread."""
    from distagent.train.ledger import AttemptClock
    from distagent.train.summaries import Writers

    with tempfile.TemporaryDirectory() as tmp:
        writers = Writers(Path(tmp))
        base = {f"tag{i}": 1.0 for i in range(8)}
        full = {**base, **AttemptClock(None, process_start=time.time()).scalars()}
        samples: dict[int, list[float]] = {0: [], 1: []}
        for side in (0, 1, 0, 1):  # trace both first
            writers.write_compiled("train", 0, (base, full)[side])
        for i in range(2 * rounds):
            side = i % 2 == (i // 2) % 2
            start = time.perf_counter()
            for step in range(calls):
                writers.write_compiled("train", step, full if side else base)
            writers.flush()  # the writing thread's seconds: its CPU is the job's too
            samples[int(side)].append((time.perf_counter() - start) / calls)
        writers.close()
    return statistics.median(samples[1]) - statistics.median(samples[0])


def _run(logdir: Path, steps: int, ledger: bool) -> tuple[float, float | None]:
    """(seconds per step past the first log point, unknown over wall or None); instrumented
    with `ledger`, else bare."""
    from distagent.train import run_job
    from distagent.train.progress import Progress

    marks: list[tuple[int, float]] = []

    def make_hook(checkpointer: Any) -> Callable[[int], None]:
        return lambda step: marks.append((step, time.perf_counter()))

    name = f"{'on' if ledger else 'off'}-{time.monotonic_ns()}"
    context = _timed_ledger() if ledger else contextlib.nullcontext()
    with context, _bare(not ledger):
        run_job(_config(logdir, name, steps), run_dir=logdir / name,
                progress=Progress(io.StringIO(), tty=False), make_step_hook=make_hook)
    first = next(m for m in marks if m[0] >= LOG_EVERY)
    last = marks[-1]
    per_step = (last[1] - first[1]) / (last[0] - first[0])
    if not ledger:
        return per_step, None
    record = json.loads((logdir / name / "run.json").read_text())
    return per_step, record["ledger"]["unknown"] / record["ledger_wall"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=600)
    args = parser.parse_args(argv)
    on: list[float] = []
    off: list[float] = []
    unknown: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for warm in (True, False):  # TensorFlow's first graphs, of both steps
            _run(Path(tmp), 2 * LOG_EVERY, warm)
        SPENT[0] = 0.0
        for i in range(2 * args.runs):
            with_ledger = i % 2 == (i // 2) % 2  # on, bare, bare, on, on, bare, ...
            per_step, share = _run(Path(tmp), args.steps, with_ledger)
            (on if with_ledger else off).append(per_step)
            if share is not None:
                unknown.append(share)
            print(f"run {i + 1}: {'instrumented' if with_ledger else 'bare        '} "
                  f"{per_step * 1e3:.3f} ms/step", flush=True)
    with_it, without = statistics.median(on), statistics.median(off)
    print(f"instrumented: {with_it * 1e3:.3f} ms/step against {without * 1e3:.3f} bare: ratio "
          f"{with_it / without:.4f} (target <= 1.01), medians of {args.runs} alternating runs "
          f"each")
    tags = _tags_cost()
    inside = SPENT[0] / (args.runs * args.steps) + tags / LOG_EVERY
    print(f"ledger from inside: {inside * 1e6:.1f} µs/step ({inside / without:.2%} of the step; "
          f"target < 1%): its calls {SPENT[0] / (args.runs * args.steps) * 1e6:.1f} µs/step, "
          f"its tags {tags * 1e6:.0f} µs a log point every {LOG_EVERY} steps")
    print(f"unknown: {statistics.median(unknown):.2%} of the wall time (median of "
          f"{len(unknown)} runs; target <= 5%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
