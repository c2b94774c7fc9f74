"""ProfileReader: each job's latest TensorFlow profile, read once, off every UI thread.

The job index tells it the jobs it knows (`watch`: each job directory with its runs' folders,
as `local_for` finds them on this machine: a local job's own, a remote job's copies, which its
remote reader makes in a `Mirror`, distcore.remote.profiles). On its own thread it looks for
profiles in a rotating share of those jobs per pass (the new ones first), never walking a whole
logdir: it lists only `<job>/plugins/profile` and each run's `<run>/plugins/profile` (where
`tf.profiler` and Keras' TensorBoard callback write them), and nothing more where there is no
such folder. A job's latest profile is summarised by `distcore.profile.summarize` (its own
subprocess, under memory, CPU and time limits), one at a time, once per (path, size, mtime): a
file caught half-written reads as unreadable and is read again once it changed. `latest()` maps
each job directory to its summary or the one-line `ProfileError` that stands for it.

`read_once(timeout_s)` is `--once`'s pass on the calling thread: every watched directory looked
at, every new profile summarised while the time lasts, and those it did not reach recorded as
not read in time.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final, Protocol

from distcore.alerts import sort_alerts
from distcore.alerts.profile import profile_input_bound
from distcore.jobs.snapshots import Job
from distcore.listeners import Listeners
from distcore.location import RunLocation
from distcore.producer import Failing, Loop, ProducerError
from distcore.profile import ProfileError, ProfileSummary, profiles_at, summarize
from distcore.textsafe import terminal_text

Profile = ProfileSummary | ProfileError
Summarizer = Callable[[Path, float], Profile]  # (path, seconds it may take) -> its summary
FileKey = tuple[Path, int, int]  # path, size, mtime in ns: a changed file is read again
INTERVAL: Final = 5.0  # seconds between passes
PER_PASS: Final = 256  # directories looked at per pass, besides the new ones
ONCE_TIMEOUT: Final = 30.0  # `--once` waits this long for all its profiles together
MAX_MEMORY: Final = 1024 * 1024 * 1024  # one summary's address space (its subprocess)


class Mirror(Protocol):
    """Remote profiles copied here (distcore.remote.profiles.ProfileMirror)."""

    def local_for(self, location: RunLocation) -> Path | None:
        """A job or run folder's path on this machine (a remote one's copies), or None."""
        ...

    def summarize(self, path: Path, timeout_s: float, summarizer: Summarizer) -> Profile:
        """The summary of a file found under local_for's paths, under its own name."""
        ...


def _summarize(path: Path, timeout_s: float) -> Profile:
    return summarize(path, timeout_s=timeout_s, max_memory=MAX_MEMORY)


def latest_profile(folders: Iterable[Path]) -> FileKey | None:
    """The newest profile in the folders' `plugins/profile/` (the last session by name, as
    find_profiles orders them) and its size and mtime; None where there is none (or it went
    away between the listing and the stat)."""
    found = [p for folder in folders for p in profiles_at(folder)]
    if not found:
        return None
    newest = max(found, key=lambda p: (p.parent.name, str(p)))
    try:
        stat = os.stat(newest)
    except OSError:
        return None
    return newest, stat.st_size, stat.st_mtime_ns


class ProfileReader:
    """A producer (start/close/errors/problems) whose `latest()` the job index merges."""

    def __init__(
        self,
        *,
        interval: float = INTERVAL,
        per_pass: int = PER_PASS,
        timeout_s: float = 60.0,
        summarizer: Summarizer = _summarize,
        mirror: Mirror | None = None,
    ) -> None:
        self._summarizer, self._timeout, self._per_pass = summarizer, timeout_s, per_pass
        self._mirror = mirror
        self._lock = threading.Lock()  # guards the fields below it
        self._dirs: tuple[Path, ...] = ()
        self._folders: dict[Path, tuple[Path, ...]] = {}  # where each job's profiles are
        self._new: list[Path] = []  # watched but never looked at: first in the next pass
        self._new_set: set[Path] = set()  # the same, to add to it at the cost of what is new
        self._cursor = 0
        self._read: dict[Path, FileKey] = {}  # the file each result in `_latest` is of
        self._latest: Mapping[Path, Profile] = MappingProxyType({})
        self._listeners: Listeners[None] = Listeners()
        self._failing = Failing("profiles")
        self._loop = Loop("profiles", self._pass, interval=interval, on_error=self._failed)

    # --- the producer's life ---------------------------------------------------------------

    def start(self) -> None:
        self._loop.start()

    def close(self) -> None:
        self._loop.close()

    def errors(self) -> tuple[ProducerError, ...]:
        return self._failing.errors()

    def problems(self) -> tuple[str, ...]:
        return ()

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """`callback()` after each new summary (the index wakes to show it)."""
        return self._listeners.subscribe(lambda _: callback())

    def _failed(self, err: Exception) -> None:
        self._failing.fail(f"{type(err).__name__}: {terminal_text(err, 200)}", time.time())

    # --- input and output --------------------------------------------------------------------

    def watch(self, jobs: Mapping[Path, Iterable[Path]], *,
              keep: Collection[Path] | None = None) -> None:
        """Look at `jobs` (each job directory with its runs' folders: new jobs, and jobs whose
        runs changed, where a new profile is likely) first in the next pass; with `keep`, the
        jobs not in it are forgotten. Wakes the thread."""
        with self._lock:
            # In place, under the lock its readers take: a copy of every job's folders at each
            # refresh would make a first read's refreshes cost what all the jobs number.
            folders = self._folders
            if keep is not None:
                folders = self._folders = {d: f for d, f in folders.items() if d in keep}
            for job, runs in jobs.items():
                folders[job] = tuple(dict.fromkeys((job, *runs)))
            if keep is not None or len(folders) != len(self._dirs):
                self._dirs = tuple(folders)
                self._forget()
            self._new.extend(job for job in jobs if job not in self._new_set)
            self._new_set.update(jobs)
        if jobs:
            self._loop.wake()

    def _forget(self) -> None:
        """Drop what was found in the jobs no longer watched (under the lock)."""
        kept = self._folders
        if any(d not in kept for d in self._latest):
            self._read = {d: k for d, k in self._read.items() if d in kept}
            self._latest = MappingProxyType({d: p for d, p in self._latest.items() if d in kept})

    def watching(self) -> bool:
        """Whether it was told any directory to look in."""
        with self._lock:
            return bool(self._dirs)

    def watched(self) -> tuple[Path, ...]:
        """The job directories it looks in."""
        with self._lock:
            return self._dirs

    def latest(self) -> Mapping[Path, Profile]:
        """Each job directory's latest profile: a new object whenever any changed."""
        with self._lock:
            return self._latest

    def local_for(self, location: RunLocation) -> Path | None:
        """Where the profiles of a job or run folder are looked for on this machine."""
        return location.local if self._mirror is None else self._mirror.local_for(location)

    # --- the work ----------------------------------------------------------------------------

    def _summary(self, path: Path, timeout_s: float) -> Profile:
        if self._mirror is None:
            return self._summarizer(path, timeout_s)
        return self._mirror.summarize(path, timeout_s, self._summarizer)

    def _due(self) -> list[Path]:
        with self._lock:
            new, self._new = self._new, []
            self._new_set = set()
            dirs = self._dirs
            if len(dirs) <= self._per_pass:
                rest = list(dirs)
            else:
                start = self._cursor % len(dirs)
                rest = [dirs[(start + i) % len(dirs)] for i in range(self._per_pass)]
                self._cursor = start + self._per_pass
        return list(dict.fromkeys([*new, *rest]))

    def _look(self, directories: Iterable[Path]) -> list[tuple[Path, FileKey]]:
        """The directories whose newest profile is not the one last read."""
        pending = []
        for directory in directories:
            with self._lock:
                folders = self._folders.get(directory, ())
            key = latest_profile(folders)  # a profile gone: its summary stays the latest
            with self._lock:
                if key is not None and self._read.get(directory) != key:
                    pending.append((directory, key))
        return pending

    def _store(self, directory: Path, key: FileKey, profile: Profile) -> None:
        with self._lock:
            if directory not in self._folders:
                return  # forgotten while it was read
            self._read[directory] = key
            self._latest = MappingProxyType({**self._latest, directory: profile})
        for callback in self._listeners.current():
            callback(None)

    def _pass(self) -> None:
        for directory, key in self._look(self._due()):
            if self._loop.stopping:
                return
            self._store(directory, key, self._summary(key[0], self._timeout))
        self._failing.ok()

    def read_once(self, timeout_s: float = ONCE_TIMEOUT,
                  clock: Callable[[], float] = time.monotonic) -> None:
        """Every watched directory looked at and its new profile summarised, one at a time,
        within `timeout_s` in all; a profile not reached in time stands as a ProfileError
        that says so."""
        deadline = clock() + timeout_s
        with self._lock:
            self._new, self._new_set = [], set()
            dirs = self._dirs
        for directory, key in self._look(dirs):
            left = deadline - clock()
            if left < 1.0:
                profile: Profile = ProfileError(
                    terminal_text(os.fspath(key[0])),
                    f"not read within the {timeout_s:g} s `--once` waits for profiles")
            else:
                profile = self._summary(key[0], left)
            self._store(directory, key, profile)


def profile_run(job: Job, profile: ProfileSummary) -> str:
    """The job's run whose folder holds the profile (Keras writes it in `train/`), else the
    job itself."""
    held = [run for run in job.parts.values()
            if profile.path.startswith(str(run.path).rstrip("/") + "/")]
    return max(held, key=lambda r: len(str(r.path))).name if held else job.name


def with_profile(job: Job, profile: Profile | None, now: float) -> Job:
    """The job with its profile, and the profile's input-stall alert where it raises one."""
    if profile is None:
        return job
    alerts = job.alerts
    if isinstance(profile, ProfileSummary):
        alert = profile_input_bound(profile, job.parts, profile_run(job, profile), now)
        if alert is not None:
            alerts = sort_alerts((*alerts, alert))
    return dataclasses.replace(job, profile=profile, alerts=alerts)
