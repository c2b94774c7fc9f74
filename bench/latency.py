"""Live latency: from a writer's flush to the new point being in distcore's store.

A writer appends one event record every ~100 ms (built with TensorBoard's protos, framed as
TFRecord, written unbuffered, like a summary writer's flush); the time from the write returning
to the point being visible is measured for distcore with inotify, distcore
polling (1 s interval), and the anchor: TensorBoard's EventMultiplexer reloaded every 5 s (the
default reload interval of TensorBoard and of its Rust data server). Prints p50/p95 per mode.

Run: .venv/bin/python bench/latency.py [--points 60]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from distcore.events import LogdirWatcher, RunStore

TAG = "loss"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _record(step: int) -> bytes:
    from tensorboard.compat.proto import event_pb2, summary_pb2

    from distcore.tfrecord.framing import record

    value = summary_pb2.Summary.Value(tag=TAG, simple_value=1.0 / (step + 1))
    return record(event_pb2.Event(
        wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=[value])
    ).SerializeToString())


def _write_points(root: Path, points: int, flushed: dict[int, float]) -> None:
    # tensorboardX's flush() hands events to a background thread, which would add its own delay.
    with open(root / "run" / "events.out.tfevents.1.bench", "ab", buffering=0) as f:
        for step in range(points):
            f.write(_record(step))
            flushed[step] = time.monotonic()
            time.sleep(random.uniform(0.07, 0.13))


def _distcore_probe(root: Path, poll: bool) -> tuple[Callable[[], int | None], Callable[[], None]]:
    store = RunStore()
    watcher = LogdirWatcher([root], store, poll=poll, poll_interval=1.0)
    watcher.start()

    def last_step() -> int | None:
        run = store.get("run")
        series = run.scalars.get(TAG) if run is not None else None
        return series.last_step if series is not None else None

    return last_step, watcher.close


def _tensorboard_probe(root: Path) -> tuple[Callable[[], int | None], Callable[[], None]]:
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.backend.event_processing import event_multiplexer as em

    mux = em.EventMultiplexer(size_guidance={ea.SCALARS: 0})
    mux.AddRunsFromDirectory(str(root))
    state: dict[str, int | None] = {"last": None}
    stop = threading.Event()

    def reload_loop() -> None:
        while not stop.is_set():
            mux.AddRunsFromDirectory(str(root))
            mux.Reload()
            try:
                events = mux.Scalars("run", TAG)
                state["last"] = events[-1].step if events else None
            except KeyError:
                pass
            stop.wait(5.0)

    thread = threading.Thread(target=reload_loop, name="tb-reload", daemon=True)
    thread.start()

    def close() -> None:
        stop.set()
        thread.join()

    return lambda: state["last"], close


def measure(mode: str, points: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "run").mkdir()
        if mode == "tensorboard (5 s reload)":
            last_step, close = _tensorboard_probe(root)
        else:
            last_step, close = _distcore_probe(root, poll=mode.startswith("distcore poll"))
        flushed: dict[int, float] = {}
        seen: dict[int, float] = {}
        writer = threading.Thread(target=_write_points, args=(root, points, flushed))
        writer.start()
        deadline = time.monotonic() + points * 0.2 + 15
        while len(seen) < points and time.monotonic() < deadline:
            step = last_step()
            now = time.monotonic()
            if step is not None:
                for s in range(step + 1):
                    seen.setdefault(s, now)
            time.sleep(0.002)
        writer.join()
        close()
    return [seen[s] - flushed[s] for s in range(points) if s in seen and s in flushed]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=60)
    args = parser.parse_args()
    results = {}
    modes = ["distcore inotify", "distcore poll (1 s)", "tensorboard (5 s reload)"]
    print(f"{'mode':<26}{'points':>7}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
    for mode in modes:
        lat = measure(mode, args.points)
        results[mode] = lat
        if not lat:
            print(f"{mode:<26}{0:>7}  no points seen")
            continue
        print(f"{mode:<26}{len(lat):>7}{statistics.median(lat) * 1e3:>9.0f}"
              f"{_percentile(lat, 0.95) * 1e3:>9.0f}{max(lat) * 1e3:>9.0f}", flush=True)
    ours, anchor = results[modes[0]], results[modes[2]]
    if ours and anchor:
        print(f"distcore inotify p50 is {statistics.median(anchor) / statistics.median(ours):.0f}x "
              "lower than TensorBoard's reload loop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
