"""Event files for the tests, written the ways users' jobs and hostile files write them:

- TFRecord framing: distcore's own `record` is the one framing the tests write with
  (test_events_framing checks its bytes against google_crc32c, independently of distcore);
  `header` is a record's start alone (a length and its CRC: data that may never come);
- events built with TensorBoard's protos (`scalar_event`, `session_start`, `scalar_records`);
- `varint`: protobuf's base-128 integer, padded to a width where a test wants a long encoding;
- `write_scalars`: a series through tensorboardX's SummaryWriter, as a training job writes one;
  `write_job`: one as distagent lays a job out.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from tensorboard.compat.proto import event_pb2, summary_pb2

from distcore.tfrecord.framing import masked_crc, record

__all__ = ["header", "record", "scalar_event", "scalar_records", "session_start", "varint",
           "write_job", "write_scalars"]


def header(length: int) -> bytes:
    """A record's length field and its masked CRC, as a record's first 12 bytes."""
    head = struct.pack("<Q", length)
    return head + struct.pack("<I", masked_crc(head))


def varint(value: int, width: int | None = None) -> bytes:
    """`value` (two's complement for negatives) as a varint, padded to `width` bytes if longer."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append(value & 0x7F)
        value >>= 7
        if not value:
            break
        out[-1] |= 0x80
    while width is not None and len(out) < width:
        out[-1] |= 0x80
        out.append(0)
    return bytes(out)


def scalar_event(tag: str, step: int, value: float, wall_time: float = 1000.0) -> bytes:
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
    return event_pb2.Event(wall_time=wall_time, step=step, summary=summary).SerializeToString()


def session_start(step: int, wall_time: float = 1000.0) -> bytes:
    log = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
    return event_pb2.Event(wall_time=wall_time, step=step, session_log=log).SerializeToString()


def scalar_records(tag: str, points: Iterable[tuple[int, float]]) -> bytes:
    return b"".join(record(scalar_event(tag, step, value)) for step, value in points)


def write_scalars(run_dir: Path, values: Sequence[float], start: float | None = None,
                  tag: str = "loss", every: float = 1.0, first_step: int = 0) -> None:
    """values[i] at step first_step + i, at wall time start + every * i (the writer's clock
    without `start`), in a new event file of `run_dir`."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(run_dir))
    for i, value in enumerate(values):
        at = None if start is None else start + every * i
        writer.add_scalar(tag, value, first_step + i, walltime=at)
    writer.close()


def write_job(logdir: Path, name: str, losses: Sequence[float], status: str | None = None) -> Path:
    """A job as distagent lays it out: <job>/train events, written up to now, and, where given,
    run.json."""
    write_scalars(logdir / name / "train", losses, time.time() - len(losses))
    if status is not None:
        (logdir / name / "run.json").write_text(json.dumps({"status": status}))
    return logdir / name
