"""What the chart grid shows, as plain data: one chart per scalar tag, grouped and filtered as
TensorBoard does, each run's raw and smoothed points and its one colour and line style.

TensorBoard groups tags by the part of their name before the first `/` and narrows them with a
regular expression; Keras' per-epoch series (`epoch_*`, written at x = epoch) are charts of
their own, read in epochs. A run keeps its colour on every chart and every refresh (a
`ColourBook` per kind of mark): a job's hue, its training run in the hue's strong tone and its
validation run in the light tone of the same hue; without colour, a line style of its own.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from distcore import names
from distcore.jobs.snapshots import Job
from distcore.smoothing import EmaSoFar, debiased_ema_grown
from distcore.textsafe import shown_names
from distmon.render.braille import ColourBook
from distmon.render.distribution import HISTOGRAM_PREFIX

# Each hue's strong and light tones (the paired "tab20" colours): training strong, validation
# light, so a run's part reads at a glance and its job by the hue.
HUES: Final = (
    ("#ff7f0e", "#ffbb78"), ("#1f77b4", "#aec7e8"), ("#2ca02c", "#98df8a"),
    ("#d62728", "#ff9896"), ("#9467bd", "#c5b0d5"), ("#e377c2", "#f7b6d2"),
    ("#bcbd22", "#dbdb8d"), ("#17becf", "#9edae5"), ("#8c564b", "#c49c94"),
)  # fmt: skip
# Line styles where there is no colour: the cells of each 4 a line is drawn in, and its name.
DASHES: Final = ((0b1111, "solid"), (0b0111, "dashed"), (0b0101, "dotted"), (0b0001, "sparse"))
PAIRED: Final = frozenset({names.TRAIN_DIR, names.VALIDATION_DIR, ""})


def per_epoch(tag: str) -> bool:
    """Keras' TensorBoard callback writes `epoch_*` at x = epoch (its batch series at steps)."""
    return tag.rsplit("/", 1)[-1].startswith("epoch_")


def group_of(tag: str) -> str:
    """TensorBoard's group: the tag's name before its first `/` (a tag without one: itself)."""
    return tag.split("/", 1)[0]


def tag_filter(pattern: str) -> re.Pattern[str]:
    """TensorBoard's tag filter, a regular expression (case-insensitive); a half-typed one
    matches literally meanwhile."""
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error:
        return re.compile(re.escape(pattern), re.IGNORECASE)


def grid_tags(jobs: Sequence[Job], pattern: str = "") -> tuple[str, ...]:
    """The scalar tags of `jobs` that the filter keeps, group by group, by name within one."""
    regex = tag_filter(pattern)
    tags = {t for j in jobs for r in j.parts.values() for t in r.scalars}
    kept = (t for t in tags if not t.startswith(HISTOGRAM_PREFIX) and regex.search(t))
    return tuple(sorted(kept, key=lambda t: (group_of(t), t)))


@dataclass(frozen=True, eq=False)
class Trace:
    """One run's points on one chart: steps (or epochs), raw and smoothed values, wall times,
    as the store's arrays; `colour` and `dash` are the run's own on every chart."""

    label: str  # the run, escaped for the terminal
    xs: Any
    raw: Any
    smooth: Any
    walls: Any
    colour: str
    dash: int
    validation: bool


@dataclass(frozen=True, eq=False)
class GridChart:
    tag: str
    axis: str  # "step" or "epoch"
    traces: tuple[Trace, ...]


class GridMemory:
    """What the grid keeps while it is open: each run's colour and line style, and, for the
    last few hundred, each series' smoothing (a live series' new points are smoothed on from
    the old ones') and each chart's drawing (drawn again only when one of its series changed:
    the store's unchanged series are the same objects from one snapshot to the next)."""

    SIZE = 512  # remembered results, least recently used first out

    def __init__(self) -> None:
        self._hues = ColourBook(len(HUES))
        self._dashes = ColourBook(len(DASHES))
        self._kept: OrderedDict[Hashable, tuple[object, Any]] = OrderedDict()
        self._smoothed: OrderedDict[Hashable, EmaSoFar] = OrderedDict()

    def remember(self, key: Hashable, keep: object, make: Callable[[], Any]) -> Any:
        """make() once for `key`; `keep` holds the objects whose ids are in the key, so that
        no other object can take an id while it is remembered."""
        hit = self._kept.get(key)
        if hit is None:
            hit = self._kept[key] = (keep, make())
            if len(self._kept) > self.SIZE:
                self._kept.popitem(last=False)
        self._kept.move_to_end(key)
        return hit[1]

    def smoothed(self, series: Hashable, values: Any, weight: float) -> Any:
        """`values` of `series` (a run's tag) smoothed; where they are the values smoothed
        last time with points appended, only the new points are smoothed."""
        before = self._smoothed.pop(series, None)
        now = self._smoothed[series] = debiased_ema_grown(values, weight, before)
        if len(self._smoothed) > self.SIZE:
            self._smoothed.popitem(last=False)
        return now.smoothed

    def looks(self, runs: Sequence[tuple[str, str, str]]) -> dict[str, tuple[str, int]]:
        """(job, part, label) of each run -> (colour, line style) by label."""
        keys = {label: job if part in PAIRED else label for job, part, label in runs}
        hues = self._hues.colors(list(dict.fromkeys(keys.values())))
        dashes = self._dashes.colors([label for _, _, label in runs])
        return {
            label: (HUES[hues[keys[label]]][part == names.VALIDATION_DIR], dashes[label])
            for _, part, label in runs
        }

    def legend(self, jobs: Sequence[Job]) -> list[tuple[str, str, int]]:
        """(label, colour, line style) of each run of `jobs` that has a scalar."""
        runs = runs_of(jobs)
        styles = self.looks(runs)
        by_job = {j.name: j for j in jobs}
        return [(label, *styles[label]) for job, part, label in runs
                if by_job[job].parts[part].scalars]


def runs_of(jobs: Sequence[Job]) -> list[tuple[str, str, str]]:
    """(job, part, shown label) of every run of `jobs`, labels told apart and escaped."""
    pairs = [(j.name, p) for j in jobs for p in j.parts]
    labels = shown_names(f"{j}/{p}" if p else j for j, p in pairs)
    return [(j, p, labels[f"{j}/{p}" if p else j]) for j, p in pairs]


def grid_charts(
    jobs: Sequence[Job], tags: Sequence[str], smoothing: float, memory: GridMemory
) -> list[GridChart]:
    """The charts of `tags` (only those asked for: a page, not all 200), each run's series of
    the tag in its look."""
    runs = runs_of(jobs)
    styles = memory.looks(runs)
    by_job = {j.name: j for j in jobs}
    charts = []
    for tag in tags:
        traces = []
        for job, part, label in runs:
            series = by_job[job].parts[part].scalars.get(tag)
            if series is None or not len(series.values):
                continue
            colour, dash = styles[label]
            smooth = (memory.smoothed((label, tag), series.values, smoothing) if smoothing
                      else series.values)
            traces.append(Trace(label, series.steps, series.values, smooth, series.wall_times,
                                colour, dash, part == names.VALIDATION_DIR))
        charts.append(GridChart(tag, "epoch" if per_epoch(tag) else "step", tuple(traces)))
    return charts
