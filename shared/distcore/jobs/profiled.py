"""JobProfiles: which job each TensorFlow profile belongs to, kept as jobs come and go.

The job index tells it, each refresh, the jobs whose runs changed (`watch`): it hands their
folders to the ProfileReader and remembers which job each folder is. It merges the reader's
latest profiles into the judged jobs (`merge`), looking up the few jobs a profile belongs to
rather than every job's place. Both cost what changed: a first read of a sweep adds jobs at
every refresh, and a pass over every job each time made listing 100,000 of them quadratic.
Only when a job is gone does it go over them all, to tell the reader what to forget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from distcore.jobs.judge import JobFacts
from distcore.jobs.profiles import Profile, ProfileReader, with_profile
from distcore.jobs.snapshots import Job
from distcore.location import RunLocation


def job_folders(
    jobs: Iterable[JobFacts], local_for: Callable[[RunLocation], Path | None]
) -> Iterator[tuple[str, Path, tuple[Path, ...]]]:
    """Each job with a place on this machine (`local_for`, a ProfileReader's: its own folder,
    or a remote job's copies): its name, its directory, and its runs' folders where a profile
    may be (the `system/` runs the recorder writes hold none)."""
    for job in jobs:
        local = local_for(job.directory) if job.directory is not None else None
        if local is None:
            continue
        runs = ((part, local_for(run.path)) for part, run in job.parts.items())
        yield job.name, local, tuple(
            path for part, path in runs
            if path is not None and part != "system" and not part.startswith("system/")
        )


class JobProfiles:
    """The job index's side of a ProfileReader (used on the index's thread only)."""

    def __init__(self, reader: ProfileReader) -> None:
        self._reader = reader
        self._told: set[str] = set()  # the jobs the reader was last told of
        self._job_at: dict[Path, str] = {}  # a job's directory on this machine -> the job
        self._merged: dict[str, tuple[Job, Profile, Job]] = {}  # judged, profile, merged

    def watch(self, facts: Mapping[str, JobFacts], touched: Iterable[str]) -> None:
        """The jobs `touched` (new, or their runs changed: where a new profile is likely) are
        looked at next; with a job gone from `facts`, the reader forgets it."""
        keep = None
        if facts.keys() != self._told:
            gone = not self._told <= facts.keys()
            self._told = set(facts)
            if gone:
                self._job_at = {}
                keep = self._place(facts.values()).keys()
        changed = (facts[name] for name in touched if name in facts)
        self._reader.watch(self._place(changed), keep=keep)

    def _place(self, jobs: Iterable[JobFacts]) -> dict[Path, tuple[Path, ...]]:
        folders = {}
        for name, local, runs in job_folders(jobs, self._reader.local_for):
            self._job_at[local] = name
            folders[local] = runs
        return folders

    def merge(self, judged: Iterable[Job], latest: Mapping[Path, Profile],
              now: float) -> tuple[Job, ...]:
        """The judged jobs, those with a profile merged with it (again only where the job or
        its profile changed)."""
        kept, self._merged = self._merged, {}
        owned = {name: (local, profile) for local, profile in latest.items()
                 if (name := self._job_at.get(local)) is not None}
        if not owned:
            return tuple(judged)
        jobs = []
        for job in judged:
            found = owned.get(job.name)
            # A job whose place moved since it was told of keeps no other place's profile.
            if found is None or job.directory is None or \
                    self._reader.local_for(job.directory) != found[0]:
                jobs.append(job)
                continue
            profile = found[1]
            before = kept.get(job.name)
            merged = before[2] if before is not None and before[0] is job and \
                before[1] is profile else with_profile(job, profile, now)
            self._merged[job.name] = (job, profile, merged)
            jobs.append(merged)
        return tuple(jobs)
