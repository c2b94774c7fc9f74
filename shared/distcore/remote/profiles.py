"""Remote profiles, copied here to be read as local ones.

A remote reader lists its logdir's `*.xplane.pb` files with its event files; of each
`plugins/profile/` folder it copies the newest (the one the profile reader would show), once
per size and time it is listed with, and only up to the profile reader's size cap
(`distcore.profile.MAX_BYTES`): a larger file is not fetched and reads as over the cap. The
copies go to a private folder (`ProfileMirror`: mode 0700, under the system's temporary
directory, removed on close), one folder a logdir, in the logdir's own layout, so the
profile reader finds them as it finds a local job's, through `local_for`. Their summaries
name the remote file, not the copy; a profile that vanished or could not be fetched is a
`ProfileError` saying why, for its run.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Final

from distcore.jobs.profiles import Profile, Summarizer
from distcore.location import RunLocation
from distcore.profile import MAX_BYTES, ProfileError
from distcore.profile.discover import SUFFIX
from distcore.remote.tail import FileMeta
from distcore.safefile import write_atomic
from distcore.textsafe import terminal_text

CAP: Final = MAX_BYTES


def newest_profiles(listing: Mapping[str, FileMeta]) -> dict[str, FileMeta]:
    """The newest `*.xplane.pb` of each `<run>/plugins/profile/<session>/` in a listing (rel
    paths), as latest_profile picks it: the last session by name, then the last file."""
    best: dict[str, str] = {}
    for rel in listing:
        parts = rel.split("/")
        if (not rel.endswith(SUFFIX) or len(parts) < 4 or parts[-4:-2] != ["plugins", "profile"]
                or any(p in ("", ".", "..") for p in parts)):
            continue
        folder = "/".join(parts[:-4])
        known = best.get(folder)
        if known is None or (parts[-2], rel) > (known.split("/")[-2], known):
            best[folder] = rel
    return {rel: listing[rel] for rel in best.values()}


class ProfileCopies:
    """One logdir's copies: which of its profiles are due, and each copy (or why none)."""

    def __init__(self, mirror: ProfileMirror, folder: str, place: RunLocation) -> None:
        self._mirror, self._folder, self._place = mirror, folder, place
        self._copied: dict[str, FileMeta] = {}  # rel -> the listing it was copied under

    def due(self, listing: Mapping[str, FileMeta]) -> list[tuple[str, FileMeta]]:
        """The newest profiles not copied under their listed size and time."""
        return [(rel, meta) for rel, meta in newest_profiles(listing).items()
                if self._copied.get(rel) != meta]

    def store(self, rel: str, meta: FileMeta, data: bytes | None, why: str = "") -> None:
        """The file's bytes (None: not fetched, `why` says why), in place of any copy."""
        if self._mirror.closed:
            return  # a reader's last refresh, after distmon closed: nothing to keep it for
        self._copied[rel] = meta
        local = self._mirror.root().joinpath(self._folder, *rel.split("/"))
        shown = terminal_text(str(self._place.joinpath(rel)))
        if data is not None and len(data) > CAP:
            data, why = None, f"over the {CAP >> 20} MiB size cap"
        self._mirror.record(local, shown, None if data is not None else why)
        local.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # an empty file stands for a profile not fetched: the reader finds it, and its
        # summary is the reason (a changed size or time is read again)
        write_atomic(local, data or b"")


class ProfileMirror:
    """The private folder of remote profiles' copies; `local_for` and `summarize` are what
    the profile reader asks of it (distcore.jobs.profiles.Mirror)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._root: Path | None = None  # made when first needed
        self.closed = False
        self._places: list[tuple[RunLocation, str]] = []
        self._shown: dict[Path, tuple[str, str | None]] = {}  # copy -> (remote path, failure)

    def root(self) -> Path:
        """The private folder (mode 0700), made at the first call."""
        with self._lock:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="distmon-profiles-"))
            return self._root

    def logdir(self, place: RunLocation) -> ProfileCopies:
        with self._lock:
            folder = str(len(self._places))
            self._places.append((place, folder))
        return ProfileCopies(self, folder, place)

    def record(self, local: Path, shown: str, failure: str | None) -> None:
        with self._lock:
            self._shown[local] = (shown, failure)

    def local_for(self, location: RunLocation) -> Path | None:
        """Where a job or run folder is on this machine: its own path, or its copies'."""
        if location.local is not None:
            return location.local
        with self._lock:
            places = list(self._places)
        for place, folder in places:
            if (place.host, place.scheme) != (location.host, location.scheme):
                continue
            try:
                inside = PurePosixPath(location.path).relative_to(place.path)
            except ValueError:
                continue
            return self.root().joinpath(folder, *inside.parts)
        return None

    def summarize(self, path: Path, timeout_s: float, summarizer: Summarizer) -> Profile:
        """A copy's summary under its remote path (a profile not fetched: why)."""
        with self._lock:
            shown, failure = self._shown.get(path, (None, None))
        if shown is None:
            return summarizer(path, timeout_s)
        if failure is not None:
            return ProfileError(shown, failure)
        return dataclasses.replace(summarizer(path, timeout_s), path=shown)

    def close(self) -> None:
        with self._lock:
            root, self.closed = self._root, True
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
