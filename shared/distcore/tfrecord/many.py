"""First reads of many small files at once, on the kernel's path: one framing and one kernel
decode for all.

A sweep is thousands of runs of one small file each; read one by one, each file pays the fixed
cost of every numpy call in framing, CRC and decoding. Here the files lie in one buffer, back to
back (the caller reads them: distcore.events.many), are framed and decoded once, and then each
file's share is assembled by the same code as a lone read (batch.decode_frames), so the result
is exactly a lone read's. A file takes this path only when its records tile it exactly (no
problem, no partial record at its end, nothing crossing its edges): then framing it alone would
find the same records. A group with any other file (damaged, growing) is refused, and its
caller reads it the ordinary way.

Plain files (PlainFiles: every scalar a simple_value record the kernel decoded, a sweep's usual
file) skip even that: the per-record plugin timeline has nothing to do for them, so their
batches are the kernel's points split by (file, tag) in one pass, decode_event's few other
records (file version, hparams) and the newest wall time. A file whose
other records hold points or a restart is not plain after all, and is read as a lone file.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from distcore.tfrecord.batch import (
    Columns,
    FastScalars,
    collect,
    counting_pays,
    decode_frames,
    decode_scalars,
)
from distcore.tfrecord.framing import F64, HEADER, I64, U8, Frames, frame
from distcore.tfrecord.record import (
    UNDECODABLE,
    Batch,
    Segment,
    UndecodableError,
    decode_event,
    newest,
)

Span = tuple[int, int]  # (where a file's bytes start in the buffer, its size)
Points = dict[str, tuple[I64, F64, F64]]


@dataclass
class _Tile:
    first: int  # the file's records: frames[first:last]
    last: int
    tiled: bool  # its records cover it exactly


def decode_files(
    raw: bytearray,
    size: int,
    groups: Sequence[Sequence[Span]],
    plugins: Callable[[int], dict[str, str]],
    compiled: ModuleType,
) -> list[list[Batch | None] | None]:
    """Decode raw[:size] (padded past `size`), which holds `groups` of files back to back.

    For each group (the files of one run): None when one of its files is not tiled exactly,
    else each file's batch in order (None for a file without records), as a lone read of the
    file from offset 0 would give it; `plugins(g)` is group g's tag -> plugin table."""
    buf = np.frombuffer(raw, dtype=np.uint8)
    frames = frame(raw, buf, size, compiled)
    placed = iter(_tiles(compiled, frames, [span for spans in groups for span in spans]))
    tiles = [[next(placed) for _ in spans] for spans in groups]
    good = [g for g, files in enumerate(tiles) if all(t.tiled for t in files)]
    kept = [t for g in good for t in tiles[g]]
    counts = [t.last - t.first for t in kept]
    starts, lengths = frames.starts, frames.lengths
    if sum(counts) != len(starts):  # (else every record is a kept file's, in order: all of them)
        pick = _ranges([t.first for t in kept], counts)
        starts, lengths = starts[pick], lengths[pick]
    fast = decode_scalars(compiled, buf, starts, lengths)
    plain = PlainFiles(compiled, fast, counts, starts, lengths)
    lone = _Lone(compiled, raw, buf, frames, fast, counts)
    out: list[list[Batch | None] | None] = [None] * len(groups)
    k = 0  # the file's place among the kept ones
    for g in good:
        table = plugins(g)
        batches: list[Batch | None] = []
        for (base, n), t in zip(groups[g], tiles[g], strict=True):
            batch = None
            if t.last > t.first:
                batch = plain.batch(k, raw, base, table) if plain.plain[k] else None
                if batch is None:  # as a lone read of the file
                    batch = lone.batch(k, t, n, table)
                    batch.problems = [(kind, off - base) for kind, off in batch.problems]
            batches.append(batch)
            k += 1
        out[g] = batches
    return out


class _Lone:
    """Files decoded each on its own (batch.decode_frames), from their shares of the group's
    fast decode: found for all of them at once, the first time one is asked for."""

    def __init__(
        self, compiled: ModuleType, raw: bytearray, buf: U8, frames: Frames, fast: FastScalars,
        counts: list[int],
    ) -> None:  # fmt: skip
        self.compiled = compiled
        self.raw, self.buf, self.frames, self.fast, self.counts = raw, buf, frames, fast, counts
        self.shares: dict[int, FastScalars] | None = None

    def batch(self, k: int, tile: _Tile, size: int, table: dict[str, str]) -> Batch:
        if self.shares is None:
            some = [f for f, c in enumerate(self.counts) if c]
            found = _shares(self.fast, [self.counts[f] for f in some])
            self.shares = dict(zip(some, found, strict=True))
        frames = self.frames
        part = Frames(frames.starts[tile.first : tile.last], frames.lengths[tile.first : tile.last],
                      size)  # fmt: skip
        return decode_frames(self.raw, self.buf, part, table, self.compiled, self.shares[k])


def _ranges(firsts: list[int], counts: list[int]) -> I64:
    """The concatenation of range(first, first + count) for each pair, in one go."""
    total = sum(counts)
    if total == 0:
        return np.zeros(0, np.int64)
    count = np.array(counts, dtype=np.int64)
    shift = np.array(firsts, dtype=np.int64) - (np.cumsum(count) - count)
    return np.repeat(shift, count) + np.arange(total, dtype=np.int64)


def _tiles(compiled: ModuleType, frames: Frames, spans: list[Span]) -> list[_Tile]:
    """Each span's range of frames, and whether its records cover it exactly, edge to edge,
    with no problem inside it: all of them in one kernel call."""
    if not spans:
        return []
    trouble = np.array(sorted(off for _, off in frames.problems), dtype=np.int64)
    firsts, lasts, tiled = compiled.tiles(
        np.ascontiguousarray(frames.starts, np.int64),
        np.ascontiguousarray(frames.lengths, np.int64), frames.end, trouble,
        np.array([base for base, _ in spans], dtype=np.int64),
        np.array([size for _, size in spans], dtype=np.int64),
    )  # fmt: skip
    return [
        _Tile(f, lst, t)
        for f, lst, t in zip(np.frombuffer(firsts, np.int64).tolist(),
                             np.frombuffer(lasts, np.int64).tolist(),
                             np.frombuffer(tiled, bool).tolist(), strict=True)
    ]  # fmt: skip


def _shares(fast: FastScalars, counts: list[int]) -> list[FastScalars]:
    """The records of each file (`counts` of them, back to back) as if decoded alone: positions
    from 0, and only the tags each uses (so that each file's cost follows its own tags). The
    (file, tag) pairs are found once for the whole group: by a presence table where it stays
    small, else by sorting."""
    tags, files = len(fast.tags), len(counts)
    starts = np.cumsum([0, *counts])  # each file's first record among the group's
    bounds = np.searchsorted(fast.index, starts)  # where each file's points start
    file_of = np.repeat(np.arange(files), np.diff(bounds))
    index = fast.index - starts[file_of]
    key = file_of * tags + fast.tag_ids
    if counting_pays(files * tags, len(key) + 16 * files):
        present = np.bincount(key, minlength=files * tags) > 0
        used, rank = np.flatnonzero(present), np.cumsum(present) - 1
        dense = rank[key]
    else:
        used, dense = np.unique(key, return_inverse=True)
    firsts = np.searchsorted(used, np.arange(files + 1) * tags).tolist()  # each file's
    local = (dense.ravel() - np.asarray(firsts[:-1], np.int64)[file_of]).astype(np.int64)
    names = [fast.tags[i] for i in (used % max(tags, 1)).tolist()]
    return [
        FastScalars(
            index[lo:hi], local[lo:hi], names[firsts[f] : firsts[f + 1]], fast.steps[lo:hi],
            fast.wall_times[lo:hi], fast.values[lo:hi], fast.is_tensor[lo:hi],
            fast.has_metadata[lo:hi],
        )
        for f, (lo, hi) in enumerate(itertools.pairwise(bounds.tolist()))
    ]


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
        if len(set(fast.tags)) != len(fast.tags):  # (see batch._segments): read alone
            plain[:] = False
        self.plain: list[bool] = plain.tolist()
        slow = np.ones(int(first[-1]), dtype=bool)
        slow[fast.index] = False
        at = np.flatnonzero(slow)
        self._slow_bounds = np.searchsorted(at, first).tolist()
        self._slow = list(zip(starts[at].tolist(), lengths[at].tolist(), strict=True))
        self._points = _points(compiled, fast, bounds, plain)
        self._walls, self._bounds = fast.wall_times, bounds.tolist()

    def batch(
        self, f: int, raw: bytes | bytearray, base: int, plugins: dict[str, str]
    ) -> Batch | None:
        """File f's batch (its bytes start at `base` in raw), or None when it is not plain
        after all (then `plugins` is as it was)."""
        before = dict(plugins)
        batch = Batch()
        columns = Columns()
        for start, size in self._slow[self._slow_bounds[f] : self._slow_bounds[f + 1]]:
            try:
                event = decode_event(bytes(raw[start : start + size]), plugins, None,
                                     self._compiled)  # fmt: skip
            except UndecodableError:
                batch.problems.append((UNDECODABLE, start - HEADER - base))
                continue
            collect(0, event, columns, batch)
            if columns.records or columns.restarts:
                plugins.clear()
                plugins.update(before)
                return None
        batch.segments = [Segment(self._points.get(f, {}), None, columns.histograms)]
        batch.newest_wall_time = newest(self._walls[self._bounds[f] : self._bounds[f + 1]])
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
    split = compiled.split(
        np.ascontiguousarray(ids, np.int64), len(names), np.ascontiguousarray(bounds),
        np.ascontiguousarray(steps, np.int64), np.ascontiguousarray(walls, np.float64),
        np.ascontiguousarray(values, np.float64),
    )  # fmt: skip
    for f, found in enumerate(split):
        if found is not None:
            raw, spans = found
            n = spans[-1][2]
            # Each tag's columns straight over the file's buffer (steps, walls, values, n
            # each): np.frombuffer wraps a bytearray in a memoryview (312 bytes an array),
            # and slices of whole-file columns would keep three more arrays per file.
            out[f] = {names[t]: (np.ndarray((hi - lo,), np.int64, raw, 8 * lo),
                                 np.ndarray((hi - lo,), np.float64, raw, 8 * (n + lo)),
                                 np.ndarray((hi - lo,), np.float64, raw, 8 * (2 * n + lo)))
                      for t, lo, hi in spans}  # fmt: skip
    return out
