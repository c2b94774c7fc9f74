"""Reading a large TensorFlow profile: a ~2M-event `*.xplane.pb` (steps, the consumer's
get-next, a tf.data pipeline, ops on several compute threads, collectives), built once under
--cache with the reader's own message classes, then summarised by `distcore.profile.summarize`
in its resource-limited subprocess, as distmon would.

Prints the file's size, the seconds `summarize` took (the subprocess's start included), the
subprocess's CPU seconds and its peak RSS, each round.

Run: .venv/bin/python bench/profile_read.py [--events 2000000] [--repeats 3] [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "shared"))

from distcore.profile import ProfileSummary, summarize  # noqa: E402
from distcore.profile.schema import classes  # noqa: E402

DEFAULT_CACHE = Path(os.environ.get("DISTMON_BENCH_CACHE", "/tmp/distmon-bench-profile"))
US = 1_000_000  # picoseconds
OPS = ["MatMul", "BiasAdd", "Relu", "Conv2D", "FusedBatchNormV3", "AddV2", "Mul", "ReadVariableOp"]
THREADS = 8
STEP_US = 10_000


def _metadata(plane: Any, table: str, names: list[str]) -> dict[str, int]:
    ids = {}
    for key, name in enumerate(names, start=1):
        entry = getattr(plane, table).add(key=key)
        entry.value.id, entry.value.name = key, name.encode()
        ids[name] = key
    return ids


def build(events: int) -> bytes:
    """An XSpace of about `events` events: each step a marker, a get-next, a map stage, one
    collective and ops spread over the compute threads."""
    space = classes()["XSpace"]()
    plane = space.planes.add(id=1, name=b"/host:CPU")
    names = ["train", "IteratorGetNextOp::DoCompute", "Iterator::Root::ParallelMapV2",
             "allreduce:CollectiveReduceV2"] + [f"model/layer_{op}:{op}" for op in OPS]
    ev = _metadata(plane, "event_metadata", names)
    st = _metadata(plane, "stat_metadata", ["step_num", "_r", "id", "parent_id", "parallelism"])
    per_step = 4 + THREADS * 50
    steps = max(events // per_step, 1)
    python, pipeline, talk = (plane.lines.add(id=i, name=n.encode(), timestamp_ns=1000) for i, n
                              in enumerate(["python", "tf_data_iterator_resource/1",
                                            "collective_ops/2"]))
    compute = [plane.lines.add(id=10 + t, name=f"tf_Compute/{t}".encode(), timestamp_ns=1000)
               for t in range(THREADS)]
    for step in range(steps):
        start = step * STEP_US * US
        marker = python.events.add(metadata_id=ev["train"], offset_ps=start,
                                   duration_ps=STEP_US * US)
        marker.stats.add(metadata_id=st["step_num"], int64_value=step)
        marker.stats.add(metadata_id=st["_r"], int64_value=1)
        python.events.add(metadata_id=ev[names[1]], offset_ps=start, duration_ps=2000 * US)
        stage = pipeline.events.add(metadata_id=ev[names[2]], offset_ps=start,
                                    duration_ps=1900 * US)
        stage.stats.add(metadata_id=st["id"], int64_value=2)
        stage.stats.add(metadata_id=st["parallelism"], int64_value=1)
        talk.events.add(metadata_id=ev[names[3]], offset_ps=start + 9000 * US,
                        duration_ps=500 * US)
        for line in compute:
            for k in range(50):
                line.events.add(metadata_id=4 + 1 + k % len(OPS),
                                offset_ps=start + (2000 + k * 140) * US, duration_ps=120 * US)
    data: bytes = space.SerializeToString()
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args()
    path = args.cache / f"bench-{args.events}.xplane.pb"
    if not path.exists():
        args.cache.mkdir(parents=True, exist_ok=True)
        path.write_bytes(build(args.events))
    print(f"{path}: {path.stat().st_size / 2**20:.1f} MiB")
    cpu_before = 0.0
    for round_ in range(args.repeats):
        began = time.perf_counter()
        summary = summarize(path, timeout_s=600)
        seconds = time.perf_counter() - began
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak_mib = children.ru_maxrss / 1024
        cpu = children.ru_utime + children.ru_stime - cpu_before
        cpu_before += cpu
        if not isinstance(summary, ProfileSummary):
            sys.exit(summary.message)
        print(f"round {round_ + 1}: {summary.events} events, {summary.step_count} steps, "
              f"{seconds:.2f} s ({cpu:.2f} s of CPU), subprocess peak RSS {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
