"""Which job a run belongs to, and as which part: pure functions over run names and paths.

Keras' TensorBoard callback writes a job as `<job>/train` and `<job>/validation`; distagent adds
`<job>/system` (GPU and host samples), `<job>/system/worker-<i>` (one per worker of a
multi-worker job) and `<job>/run.json`. tensorboardX's `add_hparams` writes its session into a
sub-run named by `str(time.time())`, `<job>/1712345678.123456`: that sub-run is a part of its
parent job (its hparams and metrics are the job's). Any other run is a job of its own (part "").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from distcore import names
from distcore.events.snapshots import RunSnapshot
from distcore.jobs.snapshots import AgentRecord, JobStatus
from distcore.location import RunLocation

TRAINING_PARTS: Final = (names.TRAIN_DIR, names.VALIDATION_DIR)
_WORKER = re.compile(r"worker-(\d{1,6})")
# str(time.time()) as tensorboardX names an add_hparams session: 9-11 digits (2001-5138), a
# fraction. Narrow on purpose: a run the user named with digits is not taken for a session.
_HPARAMS_SESSION = re.compile(r"\d{9,11}\.\d{1,9}")
_FILES_RANK: Final = {"live": 0, "idle": 1, "gone": 2}


@functools.lru_cache(maxsize=65536)  # called for every run at every refresh; names repeat
def split_run(name: str) -> tuple[str, str]:
    """(job, part): ('job', 'train') for 'job/train', ('job', 'system/worker-1') for
    'job/system/worker-1', (name, '') for a run that is not a part of a job."""
    pieces = name.split("/")
    if len(pieces) >= 2 and pieces[-2] == names.SYSTEM_DIR and _WORKER.fullmatch(pieces[-1]):
        return ("/".join(pieces[:-2]) or ".", "/".join(pieces[-2:]))
    if pieces[-1] in (*TRAINING_PARTS, names.SYSTEM_DIR) or is_hparams_part(pieces[-1]):
        return ("/".join(pieces[:-1]) or ".", pieces[-1])
    return (name, "")


def is_hparams_part(part: str) -> bool:
    """A tensorboardX `add_hparams` session's sub-run (named by its time.time())."""
    return _HPARAMS_SESSION.fullmatch(part) is not None


def is_system_part(part: str) -> bool:
    return part == names.SYSTEM_DIR or part.startswith(names.SYSTEM_DIR + "/")


def worker_of(part: str) -> int | None:
    """The worker index of `system/worker-<i>`; None for `system` and other parts."""
    match = _WORKER.fullmatch(part.rpartition("/")[2]) if "/" in part else None
    return int(match.group(1)) if match else None


Place = TypeVar("Place", Path, RunLocation)


def job_dir_of(run_path: Place, part: str) -> Place:
    """Where a distagent job's run.json would be: above its parts; a lone run's own folder."""
    return run_path.parents[part.count("/")] if part else run_path


def group_runs(runs: Iterable[RunSnapshot]) -> dict[str, dict[str, RunSnapshot]]:
    """job name -> part -> run, jobs and parts sorted by name."""
    grouped: dict[str, dict[str, RunSnapshot]] = {}
    for run in runs:
        job, part = split_run(run.name)
        grouped.setdefault(job, {})[part] = run
    return {job: dict(sorted(grouped[job].items())) for job in sorted(grouped)}


@dataclass
class Grouping:
    """`group_runs` kept between refreshes, so that grouping again costs what changed."""

    seen: tuple[RunSnapshot, ...] | None = None  # the runs last grouped
    by_run: dict[str, RunSnapshot] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)  # job -> its runs' names
    jobs: dict[str, dict[str, RunSnapshot]] = field(default_factory=dict)  # as group_runs'


def regroup(grouping: Grouping, runs: tuple[RunSnapshot, ...]) -> set[str]:
    """Update `grouping` to `group_runs(runs)` for the runs that are not the objects they were
    (a store hands out the same object while a run is unchanged); the jobs touched."""
    if runs is grouping.seen:
        return set()
    grouping.seen = runs
    by_run = {run.name: run for run in runs}
    old, members = grouping.by_run, grouping.members
    touched = {split_run(n)[0] for n, r in by_run.items() if old.get(n) is not r}
    gone = old.keys() - by_run.keys()
    touched |= {split_run(n)[0] for n in gone}
    for name in gone:
        members[split_run(name)[0]].discard(name)
    for name, run in by_run.items():
        if old.get(name) is not run:
            members.setdefault(split_run(name)[0], set()).add(name)
    grouping.by_run = by_run
    jobs = grouping.jobs
    added = False
    for job in touched:
        runs_of = members.get(job)
        if not runs_of:
            members.pop(job, None)
            jobs.pop(job, None)
            continue
        added |= job not in jobs
        jobs[job] = dict(sorted((split_run(n)[1], by_run[n]) for n in runs_of))
    if added:  # jobs sorted by name, as group_runs gives them
        grouping.jobs = {job: jobs[job] for job in sorted(jobs)}
    return touched


def job_status(parts: Mapping[str, RunSnapshot], agent: AgentRecord | None) -> JobStatus:
    """The agent's own status where run.json has one; else the files' freshest (live > idle >
    gone), judged on the training parts when there are any (system samples keep coming while a
    job's training may hang). "unreadable" where run.json could not be understood."""
    if agent is not None and agent.unreadable is not None:
        return "unreadable"
    if agent is not None and agent.status in names.RUN_STATUSES:
        return agent.status  # type: ignore[return-value]  # checked against the literal values
    training = [r for p, r in parts.items() if not is_system_part(p)] or list(parts.values())
    best = min((r.status for r in training), key=lambda s: _FILES_RANK.get(s, 3), default="gone")
    return best if best in _FILES_RANK else "idle"  # type: ignore[return-value]
