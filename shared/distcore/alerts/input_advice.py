"""What an input-bound job is told to do, read from its own pipeline.

The generic remedy (series.REMEDY: parallel map, prefetch, cache) is right for a logdir that
says nothing of its pipeline. distagent records the one it built (run.json's `plan.pipeline`:
distagent.plan._pipeline_settings): a job that already maps in parallel, prefetches and caches
is told what is left instead (more host cores, lighter or offline preprocessing, the tf.data
service), and a job that lacks some of them is told those, by their config keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

LEFT: Final = (
    "it already maps in parallel, prefetches and caches: what is left is more host cores, "
    "lighter or offline preprocessing, or the tf.data service"
)


@dataclass(frozen=True)
class PipelineFacts:
    """Which of the usual remedies a job's input pipeline uses (None: run.json did not say)."""

    parallel_map: bool | None
    prefetch: bool | None
    cache: bool | None
    optimized: bool = True  # data.optimize: off, none of the three is used whatever is set


def _on(value: Any, off: int) -> bool | None:
    """A setting from run.json (untrusted): "autotune" or a count past `off` is on."""
    if isinstance(value, bool):
        return None
    if value == "autotune":
        return True
    return value > off if isinstance(value, int) else None


def pipeline_facts(pipeline: Any) -> PipelineFacts | None:
    """PipelineFacts from run.json's `plan.pipeline`, or None where it is not an object."""
    if not isinstance(pipeline, Mapping):
        return None
    if pipeline.get("optimize") is False:
        return PipelineFacts(parallel_map=False, prefetch=False, cache=False, optimized=False)
    cache = pipeline.get("cache")
    cached = cache if isinstance(cache, bool) else (bool(cache) if isinstance(cache, str) else None)
    return PipelineFacts(parallel_map=_on(pipeline.get("parallel_calls"), 1),
                         prefetch=_on(pipeline.get("prefetch"), 0), cache=cached)  # fmt: skip


def input_advice(facts: PipelineFacts | None) -> str | None:
    """The recommendation for this pipeline; None where nothing is known (the generic one)."""
    if facts is None:
        return None
    if not facts.optimized:
        return ("turn on data.optimize (off: the map runs one example at a time, nothing is "
                "prefetched or cached)")
    remedies = (
        (facts.parallel_map, "parallel map", 'parallel map (data.parallel_calls = "autotune")'),
        (facts.prefetch, "prefetch", 'prefetch (data.prefetch = "autotune")'),
        (facts.cache, "a cache", "a cache of the dataset where it fits (data.cache)"),
    )
    if all(used is True for used, _, _ in remedies):
        return LEFT
    missing = [advice for used, _, advice in remedies if used is False]
    if not missing:  # some unknown, none known to be off
        return None
    has = [name for used, name, _ in remedies if used is True]
    return f"use {_listed(missing)}" + (f"; it already uses {_listed(has)}" if has else "")


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
