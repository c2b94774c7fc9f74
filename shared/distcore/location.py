"""RunLocation: where a run or a job directory is: on this machine, on an SSH host, under a URL.

A run read over SSH used to carry `PosixPath("gpu1:/data/runs/job")`, a local-looking path that
the text and JSON decoded back by string surgery and that the job index had to recognise so as
not to `stat` `gpu1:/…/run.json` relative to the working directory. The place is a value now:
`local` is the filesystem path only for this machine's runs (None for every remote one, so a
remote run.json can only come from its reader), `str()` is the place as shown.

A leaf (nothing of distcore): events, jobs and remote all use it.
"""

from __future__ import annotations

import functools
import posixpath
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


@dataclass(frozen=True)
class RunLocation:
    """`path` on this machine (`host` and `scheme` None), on the SSH host `host` (as named on
    screen, e.g. "gpu1"; a relative path is below the remote home), or below the URL
    `scheme://` (the path then starts with the bucket)."""

    path: PurePosixPath
    host: str | None = None
    scheme: str | None = None

    def __post_init__(self) -> None:
        if self.host is not None and self.scheme is not None:
            raise ValueError("a location is on an SSH host or under a URL, not both")

    @classmethod
    def on_this_machine(cls, path: Path | str) -> RunLocation:
        return cls(PurePosixPath(path))

    @classmethod
    def on_host(cls, host: str, path: str) -> RunLocation:
        return cls(PurePosixPath(posixpath.normpath(path)), host=host)

    @classmethod
    def at_url(cls, url: str) -> RunLocation:
        """`s3://bucket/prefix` (the scheme as written, the rest normalised)."""
        scheme, sep, rest = url.partition("://")
        if not sep or not scheme:
            raise ValueError(f"not a URL: {url!r}")
        return cls(PurePosixPath(posixpath.normpath(rest.strip("/") or ".")), scheme=scheme)

    @functools.cached_property
    def local(self) -> Path | None:
        """The path to open or stat: only for a place on this machine. Made once per location
        (a Path is immutable): the job index asks it of 10,000 job directories per refresh."""
        return Path(self.path) if self.host is None and self.scheme is None else None

    @property
    def remote(self) -> bool:
        return self.local is None

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def parents(self) -> tuple[RunLocation, ...]:
        """As `Path.parents`, in the same place (job_dir_of walks up from a run to its job)."""
        return tuple(RunLocation(p, self.host, self.scheme) for p in self.path.parents)

    def joinpath(self, *parts: str) -> RunLocation:
        joined = posixpath.normpath(posixpath.join(str(self.path), *parts))
        return RunLocation(PurePosixPath(joined), self.host, self.scheme)

    def __str__(self) -> str:
        """As shown: local paths absolute, `host:path`, `scheme://bucket/path`."""
        if self.scheme is not None:
            return f"{self.scheme}://{self.path}"
        if self.host is not None:
            return f"{self.host}:{self.path}"
        if self.path.is_absolute():  # as absolute() gives it, without a Path made each time
            return str(self.path)
        return str(Path(self.path).absolute())  # relative: from the working directory now
