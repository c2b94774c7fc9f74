"""The dashboard benchmarks' big logdir: 5 tags a step, tensorboardX's records framed and
encoded directly (fast enough for 10 million points), cached under $DISTMON_BENCH_CACHE.
Shared by bench/dashboard.py and bench/dashboard_index.py; not a benchmark itself.
"""

from __future__ import annotations

import os
import shutil
import struct
import time
from pathlib import Path

CACHE = Path(os.environ.get("DISTMON_BENCH_CACHE", "/tmp/distmon-bench-dashboard"))
TAGS = ("loss", "accuracy", "learning_rate", "perf/examples_per_second", "perf/step_time_ms")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def scalar_event(tag: bytes, value: float, step: int, wall: float) -> bytes:
    """Event{wall_time, step, summary{value{tag, simple_value}}} as tensorboardX writes it."""
    val = b"\x0a" + _varint(len(tag)) + tag + b"\x15" + struct.pack("<f", value)
    summary = b"\x0a" + _varint(len(val)) + val
    return (
        b"\x09"
        + struct.pack("<d", wall)
        + b"\x10"
        + _varint(step)
        + b"\x2a"
        + _varint(len(summary))
        + summary
    )


def generate(root: Path, runs: int, steps: int) -> None:
    from distcore.tfrecord.framing import record

    version = b"\x09" + struct.pack("<d", 1.7e9) + b"\x1a\x0dbrain.Event:2"
    for run in range(runs):
        run_dir = root / f"exp{run // 2:03d}" / ("train" if run % 2 == 0 else "validation")
        run_dir.mkdir(parents=True, exist_ok=True)
        chunks = [record(version)]
        for step in range(steps):
            wall = 1.7e9 + step * 0.5
            for i, tag in enumerate(TAGS):
                value = 1.0 / (1 + step * 0.01) + i
                chunks.append(record(scalar_event(tag.encode(), value, step, wall)))
        (run_dir / f"events.out.tfevents.{1_700_000_000 + run}.bench").write_bytes(b"".join(chunks))


def ensure_logdir(runs: int, points: int) -> Path:
    steps = points // (runs * len(TAGS))
    root = CACHE / f"{runs}runs-{steps}steps"
    if not (root / ".complete").exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        print(f"generating {root} ({runs * steps * len(TAGS):,} points) ...", flush=True)
        began = time.perf_counter()
        generate(root, runs, steps)
        (root / ".complete").write_text("ok\n")
        print(f"  done in {time.perf_counter() - began:.0f} s", flush=True)
    return root
