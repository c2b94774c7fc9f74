"""Histograms as untrusted input through the whole read: malformed values are counted as
problems of their run and never stop the rest; generated payloads never raise and the JSON
stays valid; a tag keeps at most the store's bound of points."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2

from distcore.events import load_once
from distcore.events.jsonify import run_to_json
from distcore.histograms import BAND_KEYS
from tests.kit.writers import record, scalar_event, varint

META = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="histograms"))


def event(value: summary_pb2.Summary.Value, step: int) -> bytes:
    summary = summary_pb2.Summary(value=[value])
    return event_pb2.Event(wall_time=1000.0 + step, step=step, summary=summary).SerializeToString()


def histo(tag: str, step: int, **fields: object) -> bytes:
    proto = summary_pb2.HistogramProto(**fields)
    return event(summary_pb2.Summary.Value(tag=tag, histo=proto), step)


def tensor(tag: str, step: int, rows: np.ndarray, shape: list[int]) -> bytes:
    proto = tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE, tensor_content=rows.tobytes())
    for size in shape:
        proto.tensor_shape.dim.add(size=size)
    return event(summary_pb2.Summary.Value(tag=tag, tensor=proto, metadata=META), step)


def write(root: Path, *events: bytes) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "events.out.tfevents.1.host").write_bytes(b"".join(record(e) for e in events))
    return root


def test_malformed_histograms_are_problems_and_the_rest_reads(tmp_path: Path) -> None:
    good = np.array([[0.0, 1.0, 2.0], [1.0, 2.0, 2.0]])
    write(
        tmp_path / "r",
        histo("bad/lengths", 1, min=0, max=1, num=3, bucket_limit=[1.0], bucket=[1.0, 2.0]),
        tensor("bad/shape", 1, np.zeros(4), [2, 2]),
        tensor("bad/size", 1, np.zeros(3), [2, 3]),
        tensor("good", 2, good, [2, 3]),
        histo("neg", 3, min=0, max=2, num=2, bucket_limit=[1.0, 2.0], bucket=[-5.0, 2.0]),
        scalar_event("loss", 4, 0.25),
    )
    (run,) = load_once([tmp_path])
    assert run.problems == ("events.out.tfevents.1.host: undecodable record x3 (first at byte 0)",)
    assert set(run.histograms) == {"good", "neg"} and run.scalars["loss"].count == 1
    assert run.histograms["good"].last.bands == pytest.approx(
        (0.0, 0.1336, 0.3174, 0.617, 1.0, 1.383, 1.6826, 1.8664, 2.0))
    # The negative count is an empty bucket: the bands are those of [0, 2] holding 2 values.
    assert run.histograms["neg"].last.bands[::4] == (0.0, 1.0, 2.0)
    doc = run_to_json(run)["histograms"]
    assert list(doc["good"]["percentiles"]) == list(BAND_KEYS)
    assert (doc["good"]["last_step"], doc["good"]["count"], doc["good"]["num"]) == (2, 1, 4.0)


def test_a_tag_keeps_at_most_the_bound(tmp_path: Path) -> None:
    rows = np.array([[0.0, 1.0, 1.0]])
    root = write(tmp_path / "r", *(tensor("h", step, rows * (step + 1), [1, 3])
                                   for step in range(500)))
    (run,) = load_once([root], max_points=50)
    series = run.histograms["h"]
    assert series.count == 500 and len(series.points) <= 50
    steps = [p.step for p in series.points]
    assert steps[0] == 0 and steps[-1] == 499 and steps == sorted(steps)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=st.binary(max_size=200), as_tensor=st.booleans())
def test_generated_histogram_payloads_never_raise(tmp_path: Path, payload: bytes,
                                                  as_tensor: bool) -> None:
    value = summary_pb2.Summary.Value(tag="x", metadata=META if as_tensor else None)
    data = bytearray(event(value, 1))
    # The payload as the tensor (8) or histo (5) field of the value, on the wire by hand.
    key = (8 if as_tensor else 5) << 3 | 2
    field = bytes([key]) + varint(len(payload)) + payload
    inner = value.SerializeToString() + field
    summary = bytes([1 << 3 | 2]) + varint(len(inner)) + inner
    data = event_pb2.Event(wall_time=1.0, step=1).SerializeToString() + bytes([5 << 3 | 2]) \
        + varint(len(summary)) + summary
    root = write(tmp_path / f"g{abs(hash((payload, as_tensor)))}", bytes(data))
    runs = {r.path.local: r for r in load_once([root])}
    json.dumps(run_to_json(runs[root]), allow_nan=False)


EXTREME = st.sampled_from([0.0, -0.0, 1.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                           -1.7976931348623157e308, 1e300, -1e300, math.inf, -math.inf, math.nan])
FLOAT = st.one_of(EXTREME, st.floats(width=64))
WIDTHS = {types_pb2.DT_HALF: 2, types_pb2.DT_FLOAT: 4, types_pb2.DT_DOUBLE: 8}


@st.composite
def hostile_histogram(draw: st.DrawFn) -> bytes:
    """A histo proto of any doubles, or a [k, 3] tensor of any bit patterns (signalling NaNs,
    subnormals, infinities) or of extreme doubles."""
    kind = draw(st.sampled_from(["histo", "bits", "doubles"]))
    k = draw(st.integers(1, 8))
    if kind == "histo":
        return histo("x", 1, min=draw(FLOAT), max=draw(FLOAT), num=draw(FLOAT),
                     sum=draw(FLOAT), sum_squares=draw(FLOAT),
                     bucket_limit=draw(st.lists(FLOAT, min_size=k, max_size=k)),
                     bucket=draw(st.lists(FLOAT, min_size=k, max_size=k)))
    if kind == "doubles":
        rows = np.array(draw(st.lists(FLOAT, min_size=3 * k, max_size=3 * k)))
        return tensor("x", 1, rows, [k, 3])
    dtype = draw(st.sampled_from(sorted(WIDTHS)))
    content = draw(st.binary(min_size=3 * k * WIDTHS[dtype], max_size=3 * k * WIDTHS[dtype]))
    proto = tensor_pb2.TensorProto(dtype=dtype, tensor_content=content)
    proto.tensor_shape.dim.add(size=k)
    proto.tensor_shape.dim.add(size=3)
    return event(summary_pb2.Summary.Value(tag="x", tensor=proto, metadata=META), 1)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=hostile_histogram())
def test_hostile_buckets_raise_no_numpy_warning(tmp_path: Path, payload: bytes) -> None:
    """numpy's RuntimeWarnings (overflow, invalid cast) would print on the user's terminal:
    every one is recorded here, and the read must leave none (an error, were it raised)."""
    root = write(tmp_path / f"h{abs(hash(payload))}", payload)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = {r.path.local: r for r in load_once([root])}
        doc = run_to_json(runs[root])
    assert [str(w.message) for w in caught] == []
    json.dumps(doc, allow_nan=False)
    for point in (s.last for s in runs[root].histograms.values()):
        assert len(point.bands) == len(BAND_KEYS)


def test_counts_that_overflow_a_sum_keep_their_shares() -> None:
    """Two buckets of float64's largest count: the total overflows, the halves do not."""
    from distcore.histograms.buckets import Buckets
    from distcore.histograms.compress import compress

    big = 1.7976931348623157e308
    buckets = Buckets(counts=np.array([big, big]), right=np.array([1.0, 2.0]), low=0.0,
                      high=2.0, num=2.0, proto=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bands = compress(buckets)
    same = compress(Buckets(counts=np.array([1.0, 1.0]), right=np.array([1.0, 2.0]), low=0.0,
                            high=2.0, num=2.0, proto=False))
    assert bands == pytest.approx(same)
