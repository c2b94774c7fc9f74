"""Messages the producers' threads post to the app: small, and coalesced when they come fast."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class RunsChanged(Message):
    """Some runs changed in the store; the app re-reads its snapshot, so a newer one replaces it."""

    names: frozenset[str]

    def can_replace(self, message: Message) -> bool:
        # Textual asks the older message whether the newer, pending one may replace it.
        if isinstance(message, RunsChanged):
            message.names = message.names | self.names
            return True
        return False


@dataclass
class ScanFinished(Message):
    """The initial (or reload) scan of the logdirs is done; `error` if it failed."""

    seconds: float
    error: str | None = None
