"""The decoder agrees with TensorBoard's protos on every record it accepts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2

from distcore.tfrecord import decode
from distcore.tfrecord.wire import SCALARS_METADATA
from tests.kit.writers import record

# Each test once on the compiled kernel and once on the reference (tests/core/conftest.py).
pytestmark = pytest.mark.usefixtures("decoder_path")

# Up to 20 characters (80 bytes): short enough for the fast path.
TAGS = st.text(min_size=1, max_size=20) | st.sampled_from(
    ["train/layer_01/weights/norm", "train/layer_02/weights/norm", "a", "loss", "ü/ß"]
)
STEPS = st.integers(min_value=-(2**63), max_value=2**63 - 1)
VALUES = st.floats(allow_nan=True, allow_infinity=True, width=32)
KINDS = st.sampled_from(["simple", "f32", "f32+md", "f64+md", "i64+md"])


def _as_int(value: float) -> int:
    return int(max(-(2.0**53), min(2.0**53, value))) if math.isfinite(value) else 0


def _event(kind: str, tag: str, step: int, value: float) -> bytes:
    if kind == "simple":
        val = summary_pb2.Summary.Value(tag=tag, simple_value=value)
    else:
        dtype = {"f32": types_pb2.DT_FLOAT, "f64": types_pb2.DT_DOUBLE, "i64": types_pb2.DT_INT64}
        width = kind.split("+")[0]
        np_type = {"f32": "<f4", "f64": "<f8", "i64": "<i8"}[width]
        number = _as_int(value) if width == "i64" else value
        content = np.asarray(number).astype(np_type).tobytes()
        tensor = tensor_pb2.TensorProto(dtype=dtype[width], tensor_content=content)
        tensor.tensor_shape.SetInParent()
        val = summary_pb2.Summary.Value(tag=tag, tensor=tensor)
        if kind.endswith("+md"):
            val.metadata.ParseFromString(SCALARS_METADATA)
    event = event_pb2.Event(wall_time=1.5e9 + step % 1000, step=step)
    event.summary.value.append(val)
    return event.SerializeToString()


def _expected(kind: str, value: float) -> float:
    return float(_as_int(value)) if kind.startswith("i64") else float(np.float32(value))


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(KINDS, TAGS, STEPS, VALUES), min_size=1, max_size=40))
def test_decoded_points_match_what_was_written(points: list[tuple[str, str, int, float]]) -> None:
    data = b"".join(record(_event(*p)) for p in points)
    plugins: dict[str, str] = {}
    batch, _ = decode(data, plugins)
    assert batch is not None
    got: dict[str, list[tuple[int, float]]] = {}
    for segment in batch.segments:
        for tag, (steps, _, values) in segment.points.items():
            got.setdefault(tag, []).extend(zip(steps.tolist(), values.tolist(), strict=True))
    # A tensor without metadata counts once an earlier record of its tag carried the scalars
    # metadata (as TensorBoard's per-record reader sees it).
    scalar_tags: set[str] = set()
    want: dict[str, list[tuple[int, float]]] = {}
    for kind, tag, step, value in points:
        if kind.endswith("+md"):
            scalar_tags.add(tag)
        if kind == "simple" or tag in scalar_tags:
            want.setdefault(tag, []).append((step, _expected(kind, value)))
    assert set(got) == set(want)
    for tag, expected in want.items():
        assert [s for s, _ in got[tag]] == [s for s, _ in expected]
        assert all(_same(a, b) for (_, a), (_, b) in zip(got[tag], expected, strict=True))
    assert batch.problems == []
