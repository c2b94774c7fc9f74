"""The per-group shortcuts of a sweep's first read give exactly what their per-file forms give.

tfrecord.many._shares splits a group's kernel decode into each file's share at once; each share
must equal that file's own, found by hand (positions, local tag ids, tag names, columns,
dtypes). The kernel's by_tag orders a file's points tag by tag as a stable sort by tag does,
bit for bit (NaN payloads too), and refuses what would read outside its arrays.
"""

from __future__ import annotations

import bisect
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcore.tfrecord import PADDING, decode, decode_files
from distcore.tfrecord.batch import FastScalars, _by_tag
from distcore.tfrecord.framing import HEADER, Frames, frame
from distcore.tfrecord.many import _ranges, _shares, _Tile, _tiles
from tests.core.conftest import compiled_kernel
from tests.core.events_helpers import batch_key
from tests.core.wire_builder import event_file, run_file
from tests.kit.writers import record, scalar_event, scalar_records, session_start

_COLUMNS = ("index", "tag_ids", "steps", "wall_times", "values", "is_tensor", "has_metadata")


def _as_key(fast: FastScalars) -> object:
    arrays = [np.asarray(getattr(fast, name)) for name in _COLUMNS]
    return fast.tags, [(a.dtype.str, a.view(np.uint8).tolist()) for a in arrays]


@st.composite
def _group(draw: st.DrawFn) -> tuple[FastScalars, list[int]]:
    """A group's fast decode: files of `counts` records, some records not fast (absent from
    index), each file using some of the group's tags (few, or many: both ways of _shares)."""
    counts = draw(st.lists(st.integers(1, 12), min_size=1, max_size=8))
    total = sum(counts)
    tags = draw(st.sampled_from([1, 2, 3, 200]))
    keep = draw(st.lists(st.booleans(), min_size=total, max_size=total))
    index = np.flatnonzero(np.array(keep, dtype=bool)).astype(np.int64)
    n = len(index)
    ids = draw(st.lists(st.integers(0, tags - 1), min_size=n, max_size=n))
    bits = draw(st.lists(st.integers(0, (1 << 64) - 1), min_size=n, max_size=n))
    floats = np.array(bits, dtype=np.uint64).view(np.float64)
    flags = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    fast = FastScalars(
        index, np.array(ids, dtype=np.int64), [f"tag{i}" for i in range(tags)],
        np.arange(n, dtype=np.int64) * 3, floats, floats[::-1].copy(), flags, ~flags,
    )  # fmt: skip
    return fast, counts


def _own_share(fast: FastScalars, pos: int, count: int) -> FastScalars:
    """The records pos..pos+count of a group's decode as if decoded alone: positions from 0,
    and only the tags they use, numbered in the group's order."""
    mine = [i for i, r in enumerate(fast.index.tolist()) if pos <= r < pos + count]
    used = sorted({int(fast.tag_ids[i]) for i in mine})
    pick = np.array(mine, dtype=np.int64)
    local = np.array([used.index(int(fast.tag_ids[i])) for i in mine], dtype=np.int64)
    return FastScalars(
        fast.index[pick] - pos, local, [fast.tags[t] for t in used], fast.steps[pick],
        fast.wall_times[pick], fast.values[pick], fast.is_tensor[pick], fast.has_metadata[pick],
    )  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(case=_group())
def test_shares_equal_each_files_own_share(case: tuple[FastScalars, list[int]]) -> None:
    fast, counts = case
    starts = np.cumsum([0, *counts]).tolist()
    expected = [_own_share(fast, pos, count) for pos, count in zip(starts, counts, strict=False)]
    assert [_as_key(s) for s in _shares(fast, counts)] == [_as_key(s) for s in expected]


def _by_tag_on(
    compiled: ModuleType | None, names: list[str], ids: np.ndarray, bits: np.ndarray
) -> object:
    """The kernel's path's _by_tag; None: the same by hand, tag by tag in written order."""
    steps = bits.view(np.int64)
    walls, values = bits.view(np.float64), bits[::-1].copy().view(np.float64)
    if compiled is not None:
        out = _by_tag(compiled, names, ids, steps, walls, values)
    else:
        order = sorted(range(len(ids)), key=lambda i: int(ids[i]))  # (sorted() is stable)
        out = {}
        for tag in sorted(set(ids.tolist())):
            mine = [i for i in order if ids[i] == tag]
            out[names[tag]] = (steps[mine], walls[mine], values[mine])
    return [
        (tag, [(c.dtype.str, c.view(np.uint8).tolist(), c.flags.writeable) for c in cols])
        for tag, cols in out.items()
    ]


@settings(max_examples=200, deadline=None)
@given(  # (hundreds of names for a few points: the ids are made dense first)
    names=st.integers(1, 40) | st.integers(300, 400),
    points=st.lists(st.tuples(st.integers(0, 399), st.integers(0, (1 << 64) - 1)), max_size=60),
)
def test_kernel_by_tag_equals_a_stable_sort(names: int, points: list[tuple[int, int]]) -> None:
    compiled = compiled_kernel()
    ids = np.array([t % names for t, _ in points], dtype=np.int64)
    bits = np.array([b for _, b in points], dtype=np.uint64)
    tags = [f"t{i}" for i in range(names)]
    assert _by_tag_on(compiled, tags, ids, bits) == _by_tag_on(None, tags, ids, bits)


@pytest.mark.parametrize(
    ("ids", "names", "columns", "error"),
    [
        ([0, 2], 2, 2, "tag id out of range"),
        ([-1], 2, 1, "tag id out of range"),
        ([0, 1], 2, 1, "columns of different lengths"),
        ([0], -1, 1, "bad number of tags"),
    ],
)
def test_kernel_by_tag_refuses_what_would_read_outside(
    ids: list[int], names: int, columns: int, error: str
) -> None:
    compiled = compiled_kernel()
    column = np.zeros(columns, dtype=np.int64)
    with pytest.raises(ValueError, match=error):
        compiled.by_tag(np.array(ids, dtype=np.int64), names, column, column, column)
    with pytest.raises(ValueError, match="int64"):
        compiled.by_tag(b"123", 2, column, column, column)


@pytest.mark.parametrize("tags", [["loss"], ["loss", "acc"]])
def test_a_groups_files_hand_out_columns_of_their_own(tags: list[str]) -> None:
    """Where every record of a file counts, its points come from the group's columns without
    a mask: each file still gets writable arrays of its own (no view into the group's columns,
    which would keep them all alive as long as any one run)."""
    compiled_kernel()  # (the reference path reads each file alone: nothing shared)
    files = [
        b"".join(
            record(scalar_event(tags[step % len(tags)], step, run + step / 7)) for step in range(40)
        )
        + record(session_start(20)) + scalar_records(tags[0], [(21, 1.5), (22, 2.5)])
        for run in range(3)
    ]  # fmt: skip
    data = b"".join(files)
    raw = bytearray(data) + bytes(PADDING)
    bases = np.cumsum([0, *map(len, files)]).tolist()
    spans = [[(base, len(f))] for base, f in zip(bases, files, strict=False)]
    decoded = decode_files(raw, len(data), spans, lambda g: {})
    roots = []  # the memory each file's columns lie in
    for batches, data_alone in zip(decoded, files, strict=True):
        assert batches is not None
        (batch,) = batches
        assert batch is not None
        alone, _ = decode(data_alone, {})
        assert batch_key(batch) == batch_key(alone)
        columns = [c for segment in batch.segments for cols in segment.points.values()
                   for c in cols]  # fmt: skip
        assert all(c.flags.writeable for c in columns)
        roots.append({id(_root(c)) for c in columns})
    assert all(not roots[i] & roots[j] for i in range(len(roots)) for j in range(i))


def _root(array: np.ndarray) -> object:
    base: object = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base


def _tile(frames: Frames, base: int, size: int) -> _Tile:
    """One file's range of frames and whether its records cover it exactly, edge to edge,
    with nothing gone wrong inside it, in plain Python."""
    heads = [s - HEADER for s in frames.starts.tolist()]
    ends = [s + n + 4 for s, n in zip(frames.starts.tolist(), frames.lengths.tolist(),
                                      strict=True)]  # fmt: skip
    end = base + size
    first, last = bisect.bisect_left(heads, base), bisect.bisect_left(heads, end)
    trouble = sorted(off for _, off in frames.problems)
    if bisect.bisect_left(trouble, base) != bisect.bisect_left(trouble, end) or frames.end < end:
        return _Tile(first, last, False)
    if first == last:
        return _Tile(first, last, size == 0)
    joined = all(heads[k + 1] == ends[k] for k in range(first, last - 1))
    return _Tile(first, last, heads[first] == base and ends[last - 1] == end and joined)


@settings(max_examples=150, deadline=None)
@given(
    files=st.lists(st.one_of(event_file(), run_file(), st.binary(max_size=60)), max_size=5),
    extra=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 200)), max_size=4),
)
def test_tiles_of_a_group_equal_each_files_own(
    files: list[bytes], extra: list[tuple[int, int]]
) -> None:
    """The kernel's tiles place every file at once exactly as each is placed alone: the files'
    own spans, and arbitrary ones (inside records, past the end, empty)."""
    compiled = compiled_kernel()
    data = b"".join(files)
    raw = bytearray(data) + bytes(PADDING)
    frames = frame(raw, np.frombuffer(raw, np.uint8), len(data), compiled)
    bases = np.cumsum([0, *map(len, files)]).tolist()
    spans = [*zip(bases, map(len, files), strict=False), *extra]
    assert _tiles(compiled, frames, spans) == [_tile(frames, base, size) for base, size in spans]


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 6)), max_size=8))
def test_ranges_concatenate_each_range(pairs: list[tuple[int, int]]) -> None:
    want = [i for first, count in pairs for i in range(first, first + count)]
    got = _ranges([f for f, _ in pairs], [c for _, c in pairs])
    assert got.dtype == np.int64 and got.tolist() == want
