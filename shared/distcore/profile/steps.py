"""Steps and where their time went: input wait, compute on device and host, communication,
other.

A step is a step marker's span (see collect.py) or, without markers, the time from one
get-next of the consumer to the next. Each step's time is split with a precedence, so that
the parts never overlap and add up to the step: waiting for input first (the union of the
consumer's get-next spans inside the step), then communication (collectives, wherever they
run), then device compute (kernels on GPU streams), then host compute (TensorFlow ops on the
host outside tf.data's threads); other is what is left. The input share is judged with
TensorBoard's input-pipeline thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass

from distcore import names
from distcore.profile.collect import Collected
from distcore.profile.intervals import Covered, Interval, merged, minus


@dataclass(frozen=True)
class Step:
    number: int
    start_ps: int
    step_ps: int
    input_ps: int
    device_compute_ps: int
    host_compute_ps: int
    communication_ps: int
    other_ps: int


def windows(collected: Collected) -> tuple[str, list[tuple[int, int, int]]]:
    """How steps were found, and each as (number, start, end) in time order."""
    if collected.markers:
        found = sorted(
            ((number, start, end) for number, (start, end) in collected.markers.items()),
            key=lambda step: (step[1], step[0]),
        )
        return "step markers", found
    starts = [start for start, _ in merged(collected.get_next)]
    if len(starts) < 2:
        return "none", []
    return "get-next", [(i + 1, starts[i], starts[i + 1]) for i in range(len(starts) - 1)]


def breakdown(collected: Collected) -> tuple[str, list[Step]]:
    source, found = windows(collected)
    waits = merged(collected.get_next)
    talk = minus(merged(collected.communication), waits)
    taken = merged(waits + talk)
    device = minus(merged(collected.device_compute), taken)
    taken = merged(taken + device)
    host = minus(merged(collected.host_compute), taken)
    parts = [Covered(waits), Covered(talk), Covered(device), Covered(host)]
    steps = []
    for number, start, end in found:
        wait, comm, dev, hst = (part.within(start, end) for part in parts)
        length = end - start
        other = max(length - wait - comm - dev - hst, 0)
        steps.append(Step(number, start, length, wait, dev, hst, comm, other))
    return source, steps


def input_verdict(percent: float) -> str:
    if percent >= 100 * names.INPUT_WAIT_HIGH:
        return "highly input-bound"
    if percent >= 100 * names.INPUT_WAIT_MODERATE:
        return "moderately input-bound"
    return "not input-bound"


def total(steps: list[Step]) -> Step:
    """All steps as one: the sums of their parts (number: how many)."""
    return Step(
        len(steps),
        steps[0].start_ps if steps else 0,
        sum(s.step_ps for s in steps),
        sum(s.input_ps for s in steps),
        sum(s.device_compute_ps for s in steps),
        sum(s.host_compute_ps for s in steps),
        sum(s.communication_ps for s in steps),
        sum(s.other_ps for s in steps),
    )


def span_of(steps: list[Step]) -> Interval:
    if not steps:
        return (0, 0)
    return steps[0].start_ps, max(s.start_ps + s.step_ps for s in steps)
