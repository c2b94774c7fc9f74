"""tfrecord.plain decodes a group's plain files together (points split by file and tag at once,
newest wall times in one reduction): each file's batch, and its run's plugins after it, are
exactly a lone read's, whatever else the group holds; each file's columns are its own memory.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcore.tfrecord import PADDING, decode, decode_files
from tests.core.conftest import compiled_kernel
from tests.core.events_helpers import batch_key
from tests.core.wire_builder import event_file, hparams_metadata, run_file
from tests.kit.writers import record, scalar_event, session_start

pytestmark = pytest.mark.usefixtures("decoder_path")  # compiled kernel and reference, each


def _plain_file(run: int, tags: list[str], steps: int, wall: float) -> bytes:
    """A sweep's file: file version, hparams, then simple_value scalars of `tags` in turn."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    meta = summary_pb2.SummaryMetadata.FromString(hparams_metadata(["lr", f"x{run % 3}"]))
    value = summary_pb2.Summary.Value(tag="_hparams_/session_start_info", metadata=meta)
    head = [
        event_pb2.Event(wall_time=wall, file_version="brain.Event:2").SerializeToString(),
        event_pb2.Event(wall_time=wall, summary=summary_pb2.Summary(value=[value]))
        .SerializeToString(),
    ]
    body = [scalar_event(tags[i % len(tags)], i // len(tags), run + i / 3, wall + i)
            for i in range(steps * len(tags))]  # fmt: skip
    return b"".join(record(e) for e in [*head, *body])


def _decode_alike(files: list[list[bytes]]) -> list[list[object]]:
    """decode_files over the runs' files, checked against each file read alone by the
    reference path (batches and plugins); returns each file's columns' root buffers."""
    flat = [f for run in files for f in run]
    data = b"".join(flat)
    raw = bytearray(data) + bytes(PADDING)
    bases = np.cumsum([0, *map(len, flat)]).tolist()
    spans, k = [], 0
    for run in files:
        spans.append([(bases[k + j], len(f)) for j, f in enumerate(run)])
        k += len(run)
    tables: list[dict[str, str]] = [{} for _ in files]
    decoded = decode_files(raw, len(data), spans, lambda g: tables[g])
    roots = []
    for run, batches, table in zip(files, decoded, tables, strict=True):
        if batches is None:
            continue
        alone_table: dict[str, str] = {}
        for data_alone, batch in zip(run, batches, strict=True):
            alone, _ = decode(data_alone, alone_table, reference=True)
            assert batch_key(batch) == batch_key(alone)
            if batch is not None:
                roots.append([_root(c) for s in batch.segments for cols in s.points.values()
                              for c in cols])  # fmt: skip
        assert table == alone_table
    return roots


def _root(array: np.ndarray) -> object:
    base: object = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base


@pytest.mark.parametrize("walls", [[1.7e9, 2e9, 3e9], [0.0, -0.0, 5.0], [float("nan")] * 3,
                                   [float("inf"), -float("inf"), 1.0]])  # fmt: skip
def test_plain_files_equal_lone_reads_and_own_their_columns(walls: list[float]) -> None:
    runs = [[_plain_file(r, ["loss", "acc"][: 1 + r % 2], 30, walls[r % 3])] for r in range(5)]
    runs.append([_plain_file(9, ["loss"], 5, 1.0), b"".join(
        [record(session_start(2)), record(scalar_event("loss", 3, 1.0))])])  # not plain
    roots = _decode_alike(runs)
    ids = [{id(r) for r in file_roots} for file_roots in roots]
    assert all(ids)
    assert all(not ids[i] & ids[j] for i in range(len(ids)) for j in range(i))  # none shared


def test_a_file_whose_other_records_hold_points_is_read_as_alone() -> None:
    """Two values in one event go to the general decoder: the file is not plain after all,
    its plugins are put back, and it is decoded as a lone read."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    two = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="a", simple_value=1.0),
                                     summary_pb2.Summary.Value(tag="b", simple_value=2.0)])
    odd = _plain_file(1, ["a"], 10, 7.0) + record(
        event_pb2.Event(wall_time=8.0, step=11, summary=two).SerializeToString())
    _decode_alike([[odd], [_plain_file(2, ["a"], 10, 7.0)]])


def test_many_files_and_tags_sort_without_a_count_per_pair() -> None:
    """Far more (file, tag) pairs than points (each file its own tags): sorted, not counted."""
    runs = [[_plain_file(r, [f"t{r}", f"u{r}"], 1, 2.0)] for r in range(30)]
    _decode_alike(runs)


@pytest.mark.parametrize(
    ("ids", "bounds", "columns", "error"),
    [
        ([0, 2], [0, 2], 2, "tag id out of range"),
        ([-1], [0, 1], 1, "tag id out of range"),
        ([0, 1], [0, 2], 1, "columns of different lengths"),
        ([0, 1], [0, 1], 2, "bounds do not cover"),
        ([0, 1], [1, 2], 2, "bounds do not cover"),
        ([0, 1], [0, 2, 1, 2], 2, "bounds do not cover"),
        ([0], [], 1, "bounds do not cover"),
    ],
)
def test_kernel_split_refuses_what_would_read_outside(
    ids: list[int], bounds: list[int], columns: int, error: str
) -> None:
    compiled = compiled_kernel()
    column = np.zeros(columns, dtype=np.int64)
    with pytest.raises(ValueError, match=error):
        compiled.split(np.array(ids, np.int64), 2, np.array(bounds, np.int64), column, column,
                       column)  # fmt: skip


_FILE = event_file() | run_file() | st.just(b"")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_FILE, min_size=1, max_size=3), min_size=1, max_size=6))
def test_any_group_decodes_as_its_files_alone(files: list[list[bytes]]) -> None:
    _decode_alike(files)
