"""The messages producer threads post to the app: small, and coalesced when they come fast."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from distcore.jobs.snapshots import JobsSnapshot


@dataclass
class JobsUpdated(Message):
    """The job index has a new snapshot; a newer pending one replaces an older one."""

    jobs: JobsSnapshot

    def can_replace(self, message: Message) -> bool:
        # Textual asks the older message whether the newer, pending one may replace it.
        return isinstance(message, JobsUpdated)


@dataclass
class ScanFinished(Message):
    """The initial (or reload) scan of the logdirs is done; `error` if it failed."""

    seconds: float
    error: str | None = None
