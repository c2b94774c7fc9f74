"""The hold: an alert that clears and returns within it is posted once, with its count.

Without it an alert near its threshold (an input stall between 19% and 21%, a GPU whose
memory is almost full) pages at every return: four times in ten seconds. With it each alert
(by `Alert.key`) is posted at most once per hold:

- the first time it is raised, at once (`count` 1);
- a return within the hold of its last post is counted, not posted;
- once the hold since its last post is over, the next snapshot in which it is active posts it
  again, with `count`: the times it was raised since it first was (so a flapping alert that
  stays up is said once more, its flaps counted, and one that keeps flapping is said once per
  hold);
- one that stays clear for the whole hold is forgotten: its next return is new (`count` 1);
- one that becomes more severe than it was posted (a loss spike's warning that turns critical
  as the loss stays up) is posted at once: an escalation is news, not a flap.

A hold of 0 posts every return. Pure: the state, the alerts and the time (any clock that does
not go back) in; what to post and the next state out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from distcore.alerts import SEVERITY_ORDER, Alert, AlertKey

DEFAULT_HOLD_SECONDS: Final = 60.0
MAX_HOLD_SECONDS: Final = 86_400.0


@dataclass(frozen=True)
class Held:
    """What the hold remembers of one alert."""

    first_at: float  # when it was first raised (this stretch)
    posted_at: float  # when it was last posted
    raises: int  # times raised since first_at, the first included
    posted_raises: int  # `raises` when it was last posted
    severity: str = "info"  # the most severe it was posted at (this stretch)
    cleared_at: float | None = None  # None while active

    @property
    def count(self) -> int:
        return self.raises


HoldState = Mapping[AlertKey, Held]


def at_or_above(alert: Alert, level: str) -> bool:
    return SEVERITY_ORDER.get(alert.severity, 99) <= SEVERITY_ORDER[level]


def _raised(alert: Alert, held: Held | None, now: float, hold: float) -> tuple[Held, bool]:
    """An active alert's next state, and whether it is posted now."""
    if held is None or (held.cleared_at is not None and now - held.cleared_at >= hold):
        return Held(first_at=now, posted_at=now, raises=1, posted_raises=1,
                    severity=alert.severity), True  # fmt: skip
    if held.cleared_at is not None:  # it returns
        held = dataclasses.replace(held, raises=held.raises + 1, cleared_at=None)
    worse = SEVERITY_ORDER[alert.severity] < SEVERITY_ORDER.get(held.severity, 99)
    if worse or (held.raises > held.posted_raises and now - held.posted_at >= hold):
        return dataclasses.replace(held, posted_at=now, posted_raises=held.raises,
                                   severity=alert.severity if worse else held.severity), True
    return held, False


def hold_alerts(
    state: HoldState, alerts: Iterable[Alert], level: str, now: float, hold: float
) -> tuple[list[tuple[Alert, Held]], dict[AlertKey, Held]]:
    """The alerts at or above `level` to post now (each with what the hold knows of it), and
    the next state."""
    active: dict[AlertKey, Alert] = {}
    for alert in alerts:
        if at_or_above(alert, level):
            active.setdefault(alert.key, alert)
    posts: list[tuple[Alert, Held]] = []
    after: dict[AlertKey, Held] = {}
    for key, alert in active.items():
        held, post = _raised(alert, state.get(key), now, hold)
        after[key] = held
        if post:
            posts.append((alert, held))
    for key, held in state.items():
        if key in active:
            continue
        cleared = held.cleared_at if held.cleared_at is not None else now
        if now - cleared < hold:  # may still return within the hold
            after[key] = dataclasses.replace(held, cleared_at=cleared)
    return posts, after
