"""A group's plain files decoded together: those whose scalars are all simple_value records
of the fast path (a sweep's usual file: TF1 writers, tensorboardX, Keras' hparams callback).

For such a file the per-record decoder's plugin timeline has nothing to do (no fast record
carries metadata, none is a tensor whose tag's plugin decides), so its batch is the fast
path's points by tag, the general decoder's few other records (file version, hparams), and
the newest wall time; the points of every plain file are split by (file, tag) in one pass and
the newest wall times found in one reduction (each file's columns then copied out into
memory of its own), instead of each file's dozen numpy calls (~50 µs a file, held under
the GIL). A file whose other records hold points or a restart is
not plain after all: batch() says so before changing anything, and the caller decodes it as a
lone read (batch.decode_frames). The result is exactly decode_frames' (tests compare them).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from distcore.tfrecord.batch import (
    UNDECODABLE,
    Batch,
    Segment,
    _collect,
    _Columns,
    _newest,
    decode_slow,
)
from distcore.tfrecord.fastpath import FastScalars
from distcore.tfrecord.framing import F64, HEADER, I64
from distcore.tfrecord.record import UndecodableError

Points = dict[str, tuple[I64, F64, F64]]


class PlainFiles:
    """The plain files among a group's kept files, whose records are `counts` (in order) of
    the group's fast decode `fast`; `starts`/`lengths`: every kept record's place in `raw`."""

    def __init__(
        self, compiled: ModuleType, fast: FastScalars, counts: list[int], starts: I64,
        lengths: I64,
    ) -> None:  # fmt: skip
        self._compiled = compiled
        files = len(counts)
        first = np.cumsum([0, *counts]).astype(np.int64)  # each file's first record
        bounds = np.searchsorted(fast.index, first)  # where each file's points start
        # The files with a tensor or metadata among their fast records (a sweep's have none).
        odd = np.flatnonzero(fast.is_tensor | fast.has_metadata)
        plain = np.ones(files, dtype=bool)
        plain[np.searchsorted(bounds, odd, side="right") - 1] = False
        if len(set(fast.tags)) != len(fast.tags):  # (see batch._segments): not here
            plain[:] = False
        self.plain: list[bool] = plain.tolist()
        slow = np.ones(int(first[-1]), dtype=bool)
        slow[fast.index] = False
        at = np.flatnonzero(slow)
        self._slow_bounds = np.searchsorted(at, first).tolist()
        self._slow = list(zip(starts[at].tolist(), lengths[at].tolist(), strict=True))
        self._points = _points(compiled, fast, bounds, plain)
        self._newest = _newest_each(fast.wall_times, bounds.tolist(), self.plain)

    def batch(
        self, f: int, raw: bytes | bytearray, base: int, plugins: dict[str, str]
    ) -> Batch | None:
        """File f's batch (its bytes start at `base` in raw), or None when it is not plain
        after all (then `plugins` is as it was)."""
        before = dict(plugins)
        batch = Batch()
        columns, restarts = _Columns(), list[tuple[int, int, int]]()
        for start, size in self._slow[self._slow_bounds[f] : self._slow_bounds[f + 1]]:
            try:
                event = decode_slow(self._compiled, bytes(raw[start : start + size]), plugins)
            except UndecodableError:
                batch.problems.append((UNDECODABLE, start - HEADER - base))
                continue
            _collect(0, event, columns, restarts, batch)
            if columns.records or restarts:
                plugins.clear()
                plugins.update(before)
                return None
        batch.segments = [Segment(self._points.get(f, {}), None, columns.histograms)]
        batch.newest_wall_time = self._newest[f]
        return batch


def _points(
    compiled: ModuleType, fast: FastScalars, bounds: I64, plain: np.ndarray
) -> dict[int, Points]:
    """The plain files' points by tag, in written order, tags in the order of their ids (as
    batch._by_tag gives them), each file's columns in memory of its own (a view into the
    group's would keep all of them alive as long as any one run keeps its points)."""
    steps, walls, values, ids = fast.steps, fast.wall_times, fast.values, fast.tag_ids
    sizes = np.diff(bounds)
    if not plain.all():
        keep = np.repeat(plain, sizes)
        ids = ids[keep]
        steps, walls, values = steps[keep], walls[keep], values[keep]
        sizes = sizes * plain
        bounds = np.cumsum([0, *sizes.tolist()]).astype(np.int64)
    if len(ids) == 0:
        return {}
    names = fast.tags
    out: dict[int, Points] = {}
    # one pass for all files, each into its own buffer
    split = compiled.split(
        np.ascontiguousarray(ids, np.int64), len(names), np.ascontiguousarray(bounds),
        np.ascontiguousarray(steps, np.int64), np.ascontiguousarray(walls, np.float64),
        np.ascontiguousarray(values, np.float64),
    )  # fmt: skip
    for f, found in enumerate(split):
        if found is not None:
            raw, spans = found
            n = spans[-1][2]
            s = np.frombuffer(raw, np.int64, n)
            w = np.frombuffer(raw, np.float64, n, 8 * n)
            v = np.frombuffer(raw, np.float64, n, 16 * n)
            out[f] = {names[t]: (s[lo:hi], w[lo:hi], v[lo:hi]) for t, lo, hi in spans}
    return out


def _newest_each(walls: F64, bounds: list[int], plain: list[bool]) -> list[float | None]:
    """batch._newest of each plain file's wall times, from one reduction: a finite, nonzero
    maximum is the same value whichever way it is found; anything else (NaN, infinities, a
    zero of either sign) is looked at again file by file, exactly as _newest does."""
    files = len(plain)
    out: list[float | None] = [None] * files
    # The non-empty files' points lie back to back: reduceat at each one's first point
    # reduces exactly its own.
    some = [f for f in range(files) if bounds[f + 1] > bounds[f]]
    if not any(plain[f] for f in some):
        return out
    tops = np.maximum.reduceat(walls, [bounds[f] for f in some])
    good = np.isfinite(tops) & (tops != 0)
    for f, top, ok in zip(some, tops.tolist(), good.tolist(), strict=True):
        if plain[f]:
            out[f] = top if ok else _newest(walls[bounds[f] : bounds[f + 1]])
    return out
