"""The profile reader's analyses on profiles built in TensorFlow's layout: steps from markers
or get-next, the time split, GPU streams, the tf.data stage named and its remedy, and the
interval arithmetic under them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distcore.profile.analyze import summarize_bytes
from distcore.profile.intervals import Covered, merged, minus
from distcore.profile.summary import ProfileSummary
from distcore.profile.tfdata import StageTime, remedy
from tests.core.profile_files import MS, Ev, LineSpec, space, training_steps


def _summary(planes: dict[str | bytes, list[LineSpec]]) -> ProfileSummary:
    return summarize_bytes(space(planes).SerializeToString(), "test")


@pytest.mark.parametrize("with_r", [True, False])
def test_steps_come_from_step_num_markers_with_or_without_r(with_r: bool) -> None:
    summary = _summary({"/host:CPU": training_steps(4, marker="Profiled batch", with_r=with_r)})
    assert summary.step_source == "step markers"
    assert [s.number for s in summary.steps] == [1, 2, 3, 4]
    first = summary.steps[0]
    assert (first.step_ms, first.input_ms, first.host_compute_ms) == (10, 6, 2)
    assert first.communication_ms == 0.5
    assert first.other_ms == pytest.approx(1.5)
    assert summary.input_percent == 60.0
    assert summary.input_verdict == "highly input-bound"


def test_without_markers_steps_run_from_one_get_next_to_the_next() -> None:
    lines = [line for line in training_steps(4) if line.name != "python"]
    lines.append(LineSpec("python", [Ev("IteratorGetNextOp::DoCompute", n * 10 * MS, MS)
                                     for n in range(4)]))
    summary = _summary({"/host:CPU": lines})
    assert summary.step_source == "get-next"
    assert [s.step_ms for s in summary.steps] == [10, 10, 10]
    assert all(s.input_ms == 1 for s in summary.steps)
    assert summary.input_verdict == "moderately input-bound"


@pytest.mark.parametrize(
    ("input_ms", "verdict"),
    [(0, "not input-bound"), (0.4, "not input-bound"), (0.5, "moderately input-bound"),
     (2, "highly input-bound")],
)
def test_tensorboard_thresholds(input_ms: float, verdict: str) -> None:
    python = [Ev("train", 0, 10 * MS, {"step_num": 1}),
              Ev("IteratorGetNextOp::DoCompute", 0, int(input_ms * MS))]
    summary = _summary({"/host:CPU": [LineSpec("python", python)]})
    assert summary.input_verdict == verdict


def test_gpu_streams_kernels_and_copies_and_device_compute() -> None:
    gpu = [
        LineSpec("Stream #7(Compute)", [
            Ev("volta_sgemm_128x64_nn", 1 * MS, 3 * MS, {"correlation_id": 5}),
            Ev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 4 * MS, 2 * MS),
        ]),
        LineSpec("Stream #13(MemcpyH2D)", [
            Ev("MemcpyH2D", 0, MS // 2, {"memcpy_details": "kind_src:pageable size:4096"})]),
        LineSpec("Launch Stats", [Ev("volta_sgemm_128x64_nn", 0, 9 * MS)]),
    ]
    host = [LineSpec("python", [Ev("train", 0, 10 * MS, {"step_num": 1})])]
    summary = _summary({"/host:CPU": host, "/device:GPU:0": gpu})
    streams = {(s.device, s.stream): s for s in summary.streams}
    compute = streams[("/device:GPU:0", "Stream #7(Compute)")]
    assert (compute.kernels, compute.kernel_ms, compute.copies) == (2, 5, 0)
    copies = streams[("/device:GPU:0", "Stream #13(MemcpyH2D)")]
    assert (copies.kernels, copies.copies, copies.copy_ms) == (0, 1, 0.5)
    assert len(streams) == 2
    step = summary.steps[0]
    assert (step.device_compute_ms, step.communication_ms, step.other_ms) == (3, 2, 5)
    kinds = {(op.name, op.where): op.kind for op in summary.top_ops}
    assert kinds[("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "/device:GPU:0")] == "communication"
    assert kinds[("volta_sgemm_128x64_nn", "/device:GPU:0")] == "compute"


def test_nested_ops_count_their_own_time_once() -> None:
    compute = [Ev("StatefulPartitionedCall:StatefulPartitionedCall", 0, 10 * MS),
               Ev("inner/MatMul:MatMul", 2 * MS, 6 * MS)]
    summary = _summary({"/host:CPU": [LineSpec("tf_Compute/1", compute)]})
    own = {op.name: op.self_ms for op in summary.top_ops}
    assert own == {"StatefulPartitionedCall": 4, "MatMul": 6}


def _pipeline(generator_ms: int) -> list[LineSpec]:
    """A MirroredStrategy-like pipeline: the per-device Prefetch::Generator waits on its thread
    for the multi-device iterator's own tree, where the user's map runs."""
    device = [Ev("Iterator::Root::Prefetch::Generator", 0, generator_ms * MS,
                 {"id": 11, "parent_id": 10})]
    feeder = [
        Ev("Iterator::Root::Prefetch::Rebatch", 0, 8 * MS, {"id": 21, "parent_id": 20}),
        Ev("Iterator::Root::Prefetch::Rebatch::MapAndBatch", 0, 8 * MS,
           {"id": 22, "parent_id": 21, "parallelism": 1, "autotune": "false",
            "batch_size": 64, "name": "fused(MapDataset:5,BatchDatasetV2:6)"}),
    ]
    source = [Ev("Iterator::Root::Prefetch::Rebatch::MapAndBatch::TensorSlice", 1 * MS, MS // 10,
                 {"id": 23, "parent_id": 22})]
    return [LineSpec("tf_data_iterator_resource/1", device),
            LineSpec("tf_data_multi_device_iterator_resource/2", feeder),
            LineSpec("tf_data_multi_device_iterator_resource/3", source)]


def test_the_users_map_is_named_not_the_wrappers_that_wait_for_it() -> None:
    summary = _summary({"/host:CPU": _pipeline(generator_ms=50)})
    assert summary.bottleneck is not None
    stage = summary.bottleneck.stage
    assert stage.path == "Iterator::Root::Prefetch::Rebatch::MapAndBatch"
    assert stage.self_ms == pytest.approx(7.9)
    assert stage.stats == {"name": "fused(MapDataset:5,BatchDatasetV2:6)", "parallelism": 1,
                           "autotune": "false", "batch_size": 64}
    assert summary.bottleneck.remedy.startswith("`map` (MapAndBatch) runs at parallelism 1")
    assert "Generator" not in "".join(s.path for s in summary.stages)


@pytest.mark.parametrize(
    ("kind", "stats", "says"),
    [
        ("Map", {}, "`map` runs at parallelism 1 and takes 92% of input time: "
                    "`num_parallel_calls=tf.data.AUTOTUNE`"),
        ("MapAndBatch", {"parallelism": 1, "autotune": "false"},
         "`map` (MapAndBatch) runs at parallelism 1"),
        ("ParallelMapV2", {"parallelism": 4, "autotune": "false"},
         "runs at a fixed parallelism of 4 and takes 92% of input time: "
         "`num_parallel_calls=tf.data.AUTOTUNE`"),
        ("ParallelMapV2", {"parallelism": 8, "autotune": "true"},
         "more host cores, lighter or offline preprocessing, or the tf.data service"),
        ("Interleave", {}, "`interleave` runs at parallelism 1"),
        ("ParallelInterleaveV4", {"parallelism": 2, "autotune": "false"},
         "`interleave` (ParallelInterleaveV4) runs at a fixed parallelism of 2"),
        ("TFRecord", {}, "the source `TFRecord` is slow and takes 92% of input time: read in "
                         "parallel"),
        ("BatchV2", {"batch_size": 32}, "`batch` (BatchV2) runs sequentially"),
        ("Shuffle", {"buffer_size": 10}, "`Shuffle` takes 92% of input time: move its work"),
    ],
)
def test_remedy_is_built_from_the_stage_and_its_stats(
    kind: str, stats: dict[str, int | str], says: str
) -> None:
    stage = StageTime(f"Iterator::Root::{kind}", 1, 1, dict(stats))
    assert says in remedy(stage, 0.92)


spans = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=12)


@given(base=spans, cut=spans, window=st.tuples(st.integers(-5, 65), st.integers(-5, 65)))
def test_interval_sets_match_counting_each_instant(
    base: list[tuple[int, int]], cut: list[tuple[int, int]], window: tuple[int, int]
) -> None:
    def instants(intervals: list[tuple[int, int]]) -> set[int]:
        return {t for start, end in intervals for t in range(start, end)}

    left, right = merged(base), merged(cut)
    assert instants(left) == instants(base)
    assert instants(minus(left, right)) == instants(base) - instants(cut)
    start, end = window
    expected = len({t for t in instants(base) if start <= t < end})
    assert Covered(left).within(start, end) == expected
