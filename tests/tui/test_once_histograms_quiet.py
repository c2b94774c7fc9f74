"""Hostile histogram buckets through the real `distmon --once` (text and JSON): nothing but the
report on the terminal. numpy printed "RuntimeWarning: overflow encountered in multiply" for
counts near float64's largest, and "invalid value encountered in cast" for a float32 tensor of
signalling NaNs, once per histogram read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2

from tests.kit.writers import record, scalar_event

BIG = float(np.finfo(np.float64).max)
META = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="histograms"))


def event(value: summary_pb2.Summary.Value) -> bytes:
    return event_pb2.Event(wall_time=1000.0, step=1,
                           summary=summary_pb2.Summary(value=[value])).SerializeToString()


def tensor(tag: str, dtype: int, content: bytes, rows: int) -> bytes:
    proto = tensor_pb2.TensorProto(dtype=dtype, tensor_content=content)
    proto.tensor_shape.dim.add(size=rows)
    proto.tensor_shape.dim.add(size=3)
    return event(summary_pb2.Summary.Value(tag=tag, tensor=proto, metadata=META))


def test_hostile_buckets_print_no_warning(tmp_path: Path) -> None:
    huge = np.array([[0.0, 1.0, BIG], [1.0, 2.0, BIG], [2.0, 3.0, 1.0]])
    signalling_nan = bytes.fromhex("0100807f") * 9  # float32, quiet only once cast
    proto = summary_pb2.HistogramProto(min=-BIG, max=BIG, num=BIG, bucket_limit=[1.0, 2.0],
                                       bucket=[BIG, BIG])
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.out.tfevents.1.host").write_bytes(b"".join(record(e) for e in (
        tensor("w/huge", types_pb2.DT_DOUBLE, huge.tobytes(), 3),
        tensor("w/snan", types_pb2.DT_FLOAT, signalling_nan, 3),
        event(summary_pb2.Summary.Value(tag="w/proto", histo=proto)),
        scalar_event("loss", 1, 0.5))))
    for extra in ([], ["--json"]):
        done = subprocess.run([sys.executable, "-m", "distmon", "--once", "--no-gpu", *extra,
                               str(tmp_path)], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONWARNINGS": "default"})
        assert done.returncode == 0, done.stderr
        assert done.stderr == "", done.stderr
    histograms = json.loads(done.stdout)["runs"][0]["histograms"]
    assert set(histograms) == {"w/huge", "w/snan", "w/proto"}
    # The two huge buckets hold equal shares: the bands of [0, 2] split in halves.
    assert histograms["w/huge"]["percentiles"]["50"] == 1.0
