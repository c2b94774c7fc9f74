"""steps.breakdown on arrays: intervals.py's union, difference and coverage, each a few numpy
passes over (starts, ends) arrays, for the millions of op spans of a large profile. The
results are the reference's exactly: the same steps, the same picoseconds."""

from __future__ import annotations

import numpy as np

from distcore.profile.bulkcollect import Spans
from distcore.profile.collect import Collected
from distcore.profile.steps import Step
from distcore.profile.wire import Array

Set = tuple[Array, Array]  # sorted, disjoint, non-empty [start, end) intervals


def merged(parts: list[tuple[Array, Array]]) -> Set:
    """The union of the spans, as intervals.merged makes it (touching spans join)."""
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    start = np.concatenate([s for s, _ in parts])
    end = np.concatenate([e for _, e in parts])
    keep = end > start
    start, end = start[keep], end[keep]
    if not start.size:
        return start, end
    if (start[1:] < start[:-1]).any():
        # equal starts join whichever comes first; a thread's spans come in runs in time
        # order, which a merging sort takes as they are
        order = np.argsort(start, kind="stable")
        start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    opens = np.ones(len(start), np.bool_)
    opens[1:] = start[1:] > reach[:-1]
    first = np.flatnonzero(opens)
    last = np.append(first[1:] - 1, len(start) - 1)
    return start[first], reach[last]


def minus(base: Set, cut: Set) -> Set:
    """`base` less `cut`: where a sweep over both finds base and no cut."""
    points = np.concatenate([base[0], base[1], cut[0], cut[1]])
    if not points.size:
        return base
    steps = np.concatenate([np.full(len(base[0]), 1), np.full(len(base[1]), -1),
                            np.full(len(cut[0]), 2), np.full(len(cut[1]), -2)])
    at, where = np.unique(points, return_inverse=True)
    level = np.cumsum(np.bincount(where, weights=steps, minlength=len(at)).astype(np.int64))
    pieces = np.flatnonzero(level[:-1] == 1)
    return merged([(at[pieces], at[pieces + 1])])


def within(spans: Set, start: Array, end: Array) -> Array:
    """intervals.Covered.within for each window [start, end)."""
    first_of, last_of = spans
    covered = np.zeros(len(start), np.int64)
    if not first_of.size:
        return covered
    prefix = np.concatenate([[0], np.cumsum(last_of - first_of)])
    first = np.maximum(np.searchsorted(first_of, start, "right") - 1, 0)
    last = np.searchsorted(first_of, end, "right")
    some = (end > start) & (first < last)
    first, last, start, end = first[some], last[some], start[some], end[some]
    total = prefix[last] - prefix[first]
    total -= np.maximum(0, np.minimum(start, last_of[first]) - first_of[first])
    total -= np.maximum(0, last_of[last - 1] - np.maximum(end, first_of[last - 1]))
    covered[some] = np.maximum(total, 0)
    return covered


def breakdown(collected: Collected, spans: Spans) -> tuple[str, list[Step]]:
    """steps.breakdown, the spans taken from `spans` rather than `collected`."""
    waits = merged(spans.get_next)
    source, found = _windows(collected, waits)
    talk = minus(merged(spans.communication), waits)
    taken = merged([waits, talk])
    device = minus(merged(spans.device_compute), taken)
    taken = merged([taken, device])
    host = minus(merged(spans.host_compute), taken)
    if not found:
        return source, []
    _, start, end = (np.array(column, np.int64) for column in zip(*found, strict=True))
    parts = [within(part, start, end).tolist() for part in (waits, talk, device, host)]
    steps = []
    for i, (n, s, e) in enumerate(found):
        wait, comm, dev, hst = (part[i] for part in parts)
        other = max(e - s - wait - comm - dev - hst, 0)
        steps.append(Step(n, s, e - s, wait, dev, hst, comm, other))
    return source, steps


def _windows(collected: Collected, waits: Set) -> tuple[str, list[tuple[int, int, int]]]:
    if collected.markers:
        found = sorted(
            ((number, start, end) for number, (start, end) in collected.markers.items()),
            key=lambda step: (step[1], step[0]),
        )
        return "step markers", found
    starts = waits[0].tolist()
    if len(starts) < 2:
        return "none", []
    return "get-next", [(i + 1, starts[i], starts[i + 1]) for i in range(len(starts) - 1)]
