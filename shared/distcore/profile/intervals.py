"""Sets of time as sorted, disjoint [start, end) intervals: union, difference, and the time a
set covers inside a window."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

Interval = tuple[int, int]


def merged(spans: Iterable[Interval]) -> list[Interval]:
    """The union of `spans`, as sorted disjoint intervals; empty spans are dropped."""
    out: list[Interval] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def minus(base: list[Interval], cut: list[Interval]) -> list[Interval]:
    """`base` less `cut` (both merged)."""
    out: list[Interval] = []
    j = 0
    for start, end in base:
        while j < len(cut) and cut[j][1] <= start:
            j += 1
        k, position = j, start
        while k < len(cut) and cut[k][0] < end:
            if cut[k][0] > position:
                out.append((position, cut[k][0]))
            position = max(position, cut[k][1])
            k += 1
        if position < end:
            out.append((position, end))
    return out


class Covered:
    """How much of a window a merged interval set covers, by bisection and prefix sums."""

    def __init__(self, spans: list[Interval]) -> None:
        self.starts = [s for s, _ in spans]
        self.spans = spans
        self.prefix = [0]
        for start, end in spans:
            self.prefix.append(self.prefix[-1] + end - start)

    def within(self, start: int, end: int) -> int:
        if end <= start or not self.spans:
            return 0
        first = max(bisect_right(self.starts, start) - 1, 0)
        last = bisect_right(self.starts, end)  # spans [first, last) may meet the window
        if first >= last:
            return 0
        total = self.prefix[last] - self.prefix[first]
        # Trim the two ends, which may stick out of the window.
        total -= max(0, min(start, self.spans[first][1]) - self.spans[first][0])
        total -= max(0, self.spans[last - 1][1] - max(end, self.spans[last - 1][0]))
        return max(total, 0)
