"""Histograms from every writer read the same in distmon as in TensorBoard: the real writers
(TF2 tf.summary.histogram, tf1's histogram op, tensorboardX) and ../shared/wild's files, read by
distcore and by TensorBoard's EventAccumulator + its distributions compressor (bands within one
bucket of each other); the compressor itself is table-tested against TensorBoard's."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcore.events import load_once
from distcore.histograms import BAND_KEYS, Buckets
from distcore.histograms.compress import compress

WILD = Path(__file__).resolve().parents[2].parent / "shared" / "wild"


def tb_bands(path: Path) -> dict[str, dict[int, list[float]]]:
    """TensorBoard's own reading: EventAccumulator, then the distributions plugin's compressor."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.distribution import compressor
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(path), size_guidance={"tensors": 0, "histograms": 0})
    acc.Reload()
    out: dict[str, dict[int, list[float]]] = {}
    for tag in acc.Tags()["tensors"]:
        if acc.SummaryMetadata(tag).plugin_data.plugin_name != "histograms":
            continue
        out[tag] = {e.step: [v for _, v in compressor.compress_histogram(
            tensor_util.make_ndarray(e.tensor_proto))] for e in acc.Tensors(tag)}
    for tag in acc.Tags()["histograms"]:
        out[tag] = {e.step: [v for _, v in compressor.compress_histogram_proto(e.histogram_value)]
                    for e in acc.Histograms(tag)}
    return out


def widths(path: Path) -> dict[str, float]:
    """The widest bucket of each tag's histograms: how far two readings may be apart."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(path), size_guidance={"tensors": 0, "histograms": 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()["tensors"]:
        if acc.SummaryMetadata(tag).plugin_data.plugin_name != "histograms":
            continue
        rows = [tensor_util.make_ndarray(e.tensor_proto) for e in acc.Tensors(tag)]
        out[tag] = max((float(np.max(r[:, 1] - r[:, 0])) for r in rows if r.size), default=0.0)
    for tag in acc.Tags()["histograms"]:
        out[tag] = max(float(np.max(np.diff([e.histogram_value.min,
                                             *e.histogram_value.bucket_limit]), initial=0))
                       for e in acc.Histograms(tag))
    return out


def ours(path: Path) -> dict[str, dict[int, list[float]]]:
    (run,) = [r for r in load_once([path]) if r.path.local == path]
    assert not run.problems, run.problems
    return {tag: {p.step: list(p.bands) for p in s.points} for tag, s in run.histograms.items()}


def assert_same(path: Path, *, within_bucket: bool = False) -> None:
    theirs, mine = tb_bands(path), ours(path)
    assert theirs and set(mine) == set(theirs)
    width = widths(path) if within_bucket else {}
    for tag, steps in theirs.items():
        assert set(mine[tag]) == set(steps), tag
        for step, bands in steps.items():
            tol = width.get(tag, 0.0) + 1e-9
            assert np.allclose(mine[tag][step], bands, rtol=1e-12, atol=tol), (tag, step)


@pytest.mark.slow
def test_tf2_histograms_read_as_tensorboard_reads_them(tf: Any, tmp_path: Path) -> None:
    writer = tf.summary.create_file_writer(str(tmp_path))
    rng = np.random.default_rng(3)
    with writer.as_default():
        for step in range(5):
            tf.summary.histogram("weights/w", rng.normal(step, 1 + step, 500), step=step)
            tf.summary.histogram("one_value", tf.constant([2.5] * 7), step=step)
            tf.summary.histogram("empty", tf.constant([], tf.float32), step=step)
            tf.summary.scalar("loss", 1.0 / (step + 1), step=step)
    writer.close()
    assert_same(tmp_path)
    (run,) = load_once([tmp_path])
    assert run.scalars["loss"].count == 5  # the scalars beside them are untouched


@pytest.mark.slow
def test_tf1_histo_protos_read_as_tensorboard_reads_them(tf: Any, tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    graph = tf.Graph()
    with graph.as_default():
        values = tf.compat.v1.placeholder(tf.float32, [None])
        summary = tf.compat.v1.summary.histogram("layer/activations", values)
        writer = tf.compat.v1.summary.FileWriter(str(tmp_path))
        with tf.compat.v1.Session(graph=graph) as session:
            for step in range(4):
                data = rng.exponential(1 + step, 300).astype(np.float32)
                writer.add_summary(session.run(summary, {values: data}), step)
        writer.close()
    assert_same(tmp_path)


def test_tensorboardx_histograms_read_as_tensorboard_reads_them(tmp_path: Path) -> None:
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(5)
    with SummaryWriter(str(tmp_path)) as writer:
        for step in range(4):
            writer.add_histogram("grads/fc", rng.normal(0, 0.1 * (step + 1), 1000), step)
            writer.add_histogram("ints", rng.integers(0, 5, 50), step, bins="auto")
            writer.add_scalar("loss", 0.5, step)
    assert_same(tmp_path)


def test_wild_histograms_read_as_tensorboard_reads_them() -> None:
    found = sorted({p.parent for p in WILD.rglob("events.out.tfevents.*")
                    if "wandb" in str(p)})
    if not found:
        pytest.skip(f"no wandb fixtures under {WILD}")
    for directory in found:
        theirs = tb_bands(directory)
        if theirs:
            runs = {r.path.local: r for r in load_once([directory])}
            mine = {t: {p.step: list(p.bands) for p in s.points}
                    for t, s in runs[directory].histograms.items()}
            for tag, steps in theirs.items():
                # A tag written twice at a step keeps the newest in both readers.
                for step, bands in steps.items():
                    assert np.allclose(mine[tag][step], bands, equal_nan=True), (tag, step)


def tb_compress(b: Buckets) -> list[float]:
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.plugins.distribution import compressor

    if b.proto:
        proto = summary_pb2.HistogramProto(min=b.low, max=b.high, num=b.num,
                                           bucket_limit=list(b.right), bucket=list(b.counts))
        return [v for _, v in compressor.compress_histogram_proto(proto)]
    lefts = [b.low, *b.right[:-1]]
    rows = [(lo, hi, c) for lo, hi, c in zip(lefts, b.right, b.counts, strict=True)]
    return [v for _, v in compressor.compress_histogram(rows)]


@pytest.mark.parametrize("proto", [False, True])
@pytest.mark.parametrize("counts", [
    [0, 0, 5, 0, 0], [1, 0, 0, 0, 1], [0, 0, 0, 0, 0], [3], [1, 2, 3, 4, 5], [0, 7, 0, 0, 0],
    [1e-300, 1, 0, 0, 1e300],
])
def test_compressor_table(proto: bool, counts: list[float]) -> None:
    right = np.array([1.0, 2.0, 3.0, 4.0, 5.0][: len(counts)])
    b = Buckets(np.array(counts, dtype=np.float64), right, 0.5, float(right[-1]),
                float(sum(counts)), proto)
    assert list(compress(b)) == pytest.approx(tb_compress(b), nan_ok=True)
    assert len(BAND_KEYS) == 9 and BAND_KEYS[1] == "6.68" and BAND_KEYS[-1] == "100"


@settings(max_examples=200, deadline=None)
@given(counts=st.lists(st.floats(0, 1e6), min_size=1, max_size=40),
       low=st.floats(-1e3, 1e3), width=st.floats(1e-3, 10), proto=st.booleans())
def test_compressor_matches_tensorboard_on_generated_histograms(
    counts: list[float], low: float, width: float, proto: bool
) -> None:
    right = (low + width * np.arange(1, len(counts) + 1)).astype(np.float64)
    b = Buckets(np.array(counts), right, low, float(right[-1]), float(sum(counts)), proto)
    mine, theirs = compress(b), tb_compress(b)
    assert all(math.isclose(a, t, rel_tol=1e-9, abs_tol=1e-9) for a, t in zip(mine, theirs,
                                                                            strict=True))
