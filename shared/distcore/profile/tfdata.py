"""The tf.data stage that holds the input back, and what to change about it.

Each iterator event's self time is its span less the time its child stages (the events whose
`parent_id` is its `id`, on whichever thread they ran) were running inside it: an asynchronous
stage (a parallel map, a prefetch) waits on its consumer's thread while its producer runs the
child elsewhere, and that wait is the child's time, not its own. Wrapper stages are never
named: Root, Prefetch, Rebatch and Repeat only pass elements on, and under MirroredStrategy
the multi-device iterator's per-device `Prefetch::Generator` waits for the whole pipeline on
its own thread, which tools that take the longest self time name instead of the user's map.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Final

from distcore.profile.collect import IteratorEvent
from distcore.profile.decode import StatValue
from distcore.profile.intervals import Covered, Interval, merged

WRAPPERS: Final = frozenset({"Root", "Prefetch", "Generator", "Rebatch", "Repeat"})
MAPS: Final = frozenset({"Map", "ParallelMap", "ParallelMapV2", "MapAndBatch"})
INTERLEAVES: Final = frozenset({"Interleave", "ParallelInterleave", "ParallelInterleaveV4"})
BATCHES: Final = frozenset({"Batch", "BatchV2", "ParallelBatch", "PaddedBatch"})
SOURCES: Final = frozenset(
    {"TFRecord", "TextLine", "FixedLengthRecord", "TensorSlice", "Tensor", "Range", "CSV",
     "FlatMap", "ListFiles", "SSTable", "Load"}
)
# Stats worth showing beside a stage: how parallel it runs and how much it buffers.
SHOWN_STATS: Final = (
    "name", "parallelism", "autotune", "batch_size", "buffer_limit", "buffer_size",
    "buffered_elements", "max_batch_results", "cycle_length", "deterministic",
)
AUTOTUNE: Final = "`num_parallel_calls=tf.data.AUTOTUNE`"
ALL_ON: Final = (
    "more host cores, lighter or offline preprocessing, or the tf.data service "
    "(`tf.data.experimental.service`)"
)


@dataclass
class StageTime:
    path: str
    self_ps: int = 0
    events: int = 0
    stats: dict[str, StatValue] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.path.rpartition("::")[2]


def stage_times(events: list[IteratorEvent]) -> list[StageTime]:
    """Every stage's self time, the largest first."""
    children: dict[str, list[Interval]] = defaultdict(list)
    for event in events:
        children[event.parent].append((event.start, event.end))
    covered = {key: Covered(merged(spans)) for key, spans in children.items()}
    stages: dict[str, StageTime] = {}
    for event in events:
        inside = covered.get(event.key)
        busy = inside.within(event.start, event.end) if inside else 0
        stage = stages.setdefault(event.path, StageTime(event.path))
        stage.self_ps += max(event.end - event.start - busy, 0)
        stage.events += 1
        stage.stats = event.stats
    return sorted(stages.values(), key=lambda s: (-s.self_ps, s.path))


def candidates(stages: list[StageTime]) -> list[StageTime]:
    return [s for s in stages if s.kind not in WRAPPERS]


def _number(stats: dict[str, StatValue], name: str) -> int | None:
    value = stats.get(name)
    return value if isinstance(value, int) else None


def _on(stats: dict[str, StatValue], name: str) -> bool:
    return str(stats.get(name, "")).lower() == "true"


def remedy(stage: StageTime, share: float) -> str:
    """What to change, from the stage's kind and its own stats. `share`: of input time, 0-1."""
    kind, stats = stage.kind, stage.stats
    takes = f"takes {share * 100:.0f}% of input time"
    parallelism = _number(stats, "parallelism")
    if kind in MAPS | INTERLEAVES | {"ParallelBatch"}:
        verb = "interleave" if kind in INTERLEAVES else "map"
        verb = "batch" if kind == "ParallelBatch" else verb
        shown = f"`{verb}` ({kind})" if kind != verb.capitalize() else f"`{verb}`"
        if kind in ("Map", "Interleave") or parallelism is None or parallelism <= 1:
            return f"{shown} runs at parallelism 1 and {takes}: {AUTOTUNE}"
        if not _on(stats, "autotune"):
            return (f"{shown} runs at a fixed parallelism of {parallelism} and {takes}: "
                    f"{AUTOTUNE}")
        return f"{shown} runs in parallel, tuned by tf.data, and {takes}: {ALL_ON}"
    if kind in BATCHES:
        return f"`batch` ({kind}) runs sequentially and {takes}: {AUTOTUNE} in `batch`"
    if kind in SOURCES:
        return (f"the source `{kind}` is slow and {takes}: read in parallel, with "
                f"`interleave(..., {AUTOTUNE[1:-1]})` over files or `num_parallel_reads`")
    return (f"`{kind}` {takes}: move its work into a parallel `map` ({AUTOTUNE}), or "
            f"{ALL_ON}")
