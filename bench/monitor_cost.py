"""The monitor's cost per step: the same script with it and without it.

Two scripts, each on a fast step (a small MLP, a few milliseconds a step on 2 CPU replicas) and
a slow one (a wider MLP, tens of milliseconds): a custom loop (`monitor.run`, `run.iterate`,
`run.step`) and `model.fit` (`monitor.KerasCallback`). Each variant runs `--runs` times with
the monitor and `--runs` times without, alternating, in this process (TensorFlow started
once). A run's time per step is from the end of its warm-up steps (tracing done) to the end of
its last step, taken at each step's end by the script itself (a loop's own clock, or a
LambdaCallback that both fits carry); the ratio is of the two medians. On a shared machine
runs differ by more than the monitor costs, so its cost is also measured from inside: the
seconds spent in the session's own per-step calls (a step's begin, its input wait's record,
its end with the log points) during the runs with it, after the same warm-up, per step, over
the step without it (`inside_ratio`; fit's in-graph timestamps are inside its step and only in
`ratio`). Target: at most 1.01.

    .venv/bin/python bench/monitor_cost.py [--runs 5] [--steps 300] [--only fit/slow ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "shared"), str(ROOT / "agent")]
WARMUP = 40
"""Steps left out of every measure: tracing, and the log points' first writes (the first
eager, the second tracing the compiled write) are start-up, paid once a run."""
WIDTHS = {"fast": 64, "slow": 2048}
BATCH = 64


def _tf() -> Any:
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    return tf


def _model(tf: Any, strategy: Any, width: int) -> Any:
    import keras

    keras.utils.set_random_seed(1)
    with strategy.scope():
        model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(width, "relu"),
                                  keras.layers.Dense(width, "relu"), keras.layers.Dense(1)])
        model.compile(keras.optimizers.SGD(0.01), "mse")
    return model


def _data(tf: Any, steps: int) -> Any:
    x = tf.random.stateless_normal((BATCH * 8, 32), seed=(1, 2))
    return tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(BATCH).repeat() \
        .take(steps).prefetch(2)


def loop_run(tf: Any, strategy: Any, width: int, steps: int, logdir: Path | None) -> float:
    """Seconds per step of a custom loop, with the monitor when `logdir` is given."""
    from distagent import monitor

    model = _model(tf, strategy, width)
    optimizer = model.optimizer

    @tf.function
    def train_step(batch: Any) -> Any:
        def one(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(x) - y) ** 2)
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                          model.trainable_variables, strict=True))
            return loss
        return strategy.reduce("MEAN", strategy.run(one, args=batch), axis=None)

    dist = strategy.experimental_distribute_dataset(_data(tf, steps))
    ends: list[float] = []
    run_cm: Any = monitor.run(logdir, name="loop", strategy=strategy, global_batch_size=BATCH) \
        if logdir is not None else contextlib.nullcontext()
    with run_cm as run:
        batches = run.iterate(dist) if run is not None else dist
        for batch in batches:
            loss = train_step(batch)
            if run is not None:
                run.step(loss=loss)
            ends.append(time.perf_counter())
    return (ends[-1] - ends[WARMUP]) / (len(ends) - 1 - WARMUP)


def fit_run(tf: Any, strategy: Any, width: int, steps: int, logdir: Path | None) -> float:
    """Seconds per step of `model.fit`, with the monitor's callback when `logdir` is given."""
    import keras

    from distagent import monitor

    model = _model(tf, strategy, width)
    ends: list[float] = []
    callbacks: list[Any] = [keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: ends.append(time.perf_counter()))]
    if logdir is not None:
        callbacks.append(monitor.KerasCallback(logdir, name="fit"))
    model.fit(_data(tf, steps), epochs=1, callbacks=callbacks, verbose=0)
    return (ends[-1] - ends[WARMUP]) / (len(ends) - 1 - WARMUP)


@contextlib.contextmanager
def _timed_session(spent: list[float]) -> Iterator[None]:
    """The session's per-step calls, their seconds added to `spent` (calls and steps)."""
    from distagent.monitor.session import Session

    originals = {name: getattr(Session, name) for name in ("step_began", "waited", "step_ended")}

    def timed(name: str) -> Callable[..., Any]:
        original = originals[name]

        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self.step < WARMUP:
                return original(self, *args, **kwargs)
            start = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - start
                spent[1] += name == "step_ended"
        return call

    for name in originals:
        setattr(Session, name, timed(name))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(Session, name, original)


def measure(run: Callable[..., float], tf: Any, strategy: Any, width: int, steps: int,
            runs: int) -> dict[str, float]:
    with_it, without = [], []
    spent = [0.0, 0.0]
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            without.append(run(tf, strategy, width, steps, None))
            with _timed_session(spent):
                with_it.append(run(tf, strategy, width, steps, Path(tmp) / str(i)))
    base, monitored = statistics.median(without), statistics.median(with_it)
    inside = spent[0] / max(1.0, spent[1])
    return {"step_ms_without": 1000 * base, "step_ms_with": 1000 * monitored,
            "ratio": monitored / base, "inside_ms_per_step": 1000 * inside,
            "inside_ratio": 1 + inside / base}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--only", action="append", default=[], metavar="SCRIPT/STEP",
                        help="measure only these cases (loop/fast, loop/slow, fit/fast, "
                             "fit/slow); all by default")
    args = parser.parse_args()
    tf = _tf()
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    results = {}
    for script, run in (("loop", loop_run), ("fit", fit_run)):
        for kind, width in WIDTHS.items():
            if args.only and f"{script}/{kind}" not in args.only:
                continue
            found = measure(run, tf, strategy, width, args.steps, args.runs)
            results[f"{script}/{kind}"] = found
            print(f"{script:4} {kind:4}: {found['step_ms_without']:8.3f} ms/step without, "
                  f"{found['step_ms_with']:8.3f} with, ratio {found['ratio']:.3f}; the "
                  f"monitor's own calls {found['inside_ms_per_step']:.4f} ms/step, inside "
                  f"ratio {found['inside_ratio']:.4f}", flush=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
