"""Alerts that reach a person: each new alert at or above a level, posted to a webhook.

Which alerts are posted is distcore.webhook.hold's pure rule: an alert is "the same" while its
key stays (kind, run, and for GPU alerts host and GPU); it is posted when first raised, and one
that clears and returns within the hold (60 s by default) is posted once, with its count.
`Notifier` takes snapshots from any thread (it only queues), and posts on its own thread, in
order, retrying each failed post with capped exponential backoff; each post follows
distcore.webhook.post's client rule (one deadline per post, never redirected, a 3xx or a 4xx
other than 429 dropped), and never blocks the caller. Every post is counted by its outcome
(`counts`, exported by `--metrics`). The payload is JSON with a Slack-compatible `text` and the
alert's own fields. The URL is a secret: only `redact_url` of it is ever printed.
"""

from __future__ import annotations

import collections
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from distcore.alerts import Alert, AlertKey
from distcore.errors import DistmonError
from distcore.jobs.snapshots import JobsSnapshot
from distcore.textsafe import json_safe
from distcore.webhook.hold import DEFAULT_HOLD_SECONDS, Held, hold_alerts
from distcore.webhook.post import post
from distcore.webhook.url import check_url, redact_url, split_credentials

__all__ = ["LEVELS", "OUTCOMES", "Notifier", "check_level", "check_url", "payload", "redact_url"]

log = logging.getLogger(__name__)
LEVELS: Final = ("info", "warning", "critical")
# How each post ended (distmon_notify_posts_total's `outcome`): taken by the receiver, one try
# that failed and is retried, refused for good (a 3xx or a 4xx other than 429: dropped), or
# never tried because the queue was full.
OUTCOMES: Final = ("delivered", "failed", "refused", "queue_full")
TIMEOUT_SECONDS: Final = 10.0  # one whole post; a hung receiver is retried after it
FIRST_BACKOFF: Final = 1.0
MAX_BACKOFF: Final = 300.0
MAX_QUEUED: Final = 1000  # beyond this the oldest waiting notification is dropped (and counted)
DROP_REPORT_SECONDS: Final = 60.0  # an alert storm's drops are said once per this, in one line
_SLACK_ESCAPES: Final = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def check_level(level: str) -> str:
    if level not in LEVELS:
        raise DistmonError(f"--notify-level: expected one of {', '.join(LEVELS)}, got {level!r}")
    return level


def _slack(text: str) -> str:
    """Slack reads &, < and > as markup (links, mentions): escaped as its docs say."""
    return "".join(_SLACK_ESCAPES.get(c, c) for c in text)


def payload(
    alert: Alert, job: str | None, host: str, count: int = 1, over: float = 0.0
) -> dict[str, Any]:
    """The JSON body: `text` for Slack (and Mattermost, Rocket.Chat, Teams' incoming hooks),
    then the alert's fields for any other receiver (`host` and `gpu` are the alert's: what a GPU
    alert is about), `count` (times raised in `over` seconds, this one included: see the hold),
    and `distmon_host`, where distmon runs; valid JSON whatever the names held."""
    where = alert.run or alert.host or "all jobs"
    again = f"; raised {count} times in {over:.0f} s" if count > 1 else ""
    text = f"[{alert.severity}] {where}: {alert.message} (distmon on {host}{again})"
    body = {"text": _slack(text), **alert.to_json(), "count": count, "job": job,
            "distmon_host": host, "source": "distmon"}  # fmt: skip
    return dict(json_safe(body))


class Notifier:
    """Posts new alerts to `url` on its own thread. `observe` (from the index's thread) only
    computes what to post (the hold: `hold` seconds, on `clock`) and queues it."""

    def __init__(
        self,
        url: str,
        level: str = "critical",
        *,
        timeout: float = TIMEOUT_SECONDS,
        first_backoff: float = FIRST_BACKOFF,
        max_backoff: float = MAX_BACKOFF,
        report: Callable[[str], None] = lambda line: log.warning("%s", line),
        hostname: str | None = None,
        drop_report_interval: float = DROP_REPORT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        hold: float = DEFAULT_HOLD_SECONDS,
    ) -> None:
        self.url, self.level = check_url(url), check_level(level)
        self.shown_url = redact_url(url)
        self._target, self._headers = split_credentials(url)
        self._timeout, self._first, self._max = timeout, first_backoff, max_backoff
        self._report, self._host = report, hostname or socket.gethostname()
        self._held: dict[AlertKey, Held] = {}
        self._hold = hold
        self._queue: collections.deque[dict[str, Any]] = collections.deque()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Posts by outcome (OUTCOMES), read by the scrape's thread: each only ever grows.
        self.sent = 0  # delivered
        self.failed = 0  # tries that failed and are retried
        self.refused = 0  # redirected or a 4xx other than 429: dropped, not retried
        self.dropped = 0  # queue full: never tried
        self._drop_interval, self._clock = drop_report_interval, clock
        self._unsaid_drops = 0
        self._drops_said_at: float | None = None  # the storm's window start; None: no storm

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("notifier already started")
        self._thread = threading.Thread(target=self._run, name="notify", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=self._timeout + 5.0)
        with self._cond:
            line = self._drop_line(force=True)
        if line:
            self._report(line)

    def observe(self, snap: JobsSnapshot) -> None:
        """Queue the snapshot's new alerts; never blocks on the network."""
        job_of = {r.name: j.name for j in snap.jobs for r in j.parts.values()}
        job_of.update({j.name: j.name for j in snap.jobs})
        now = self._clock()
        found, self._held = hold_alerts(self._held, snap.alerts, self.level, now, self._hold)
        bodies = [payload(a, job_of.get(a.run or ""), self._host, held.count, now - held.first_at)
                  for a, held in found]  # fmt: skip
        with self._cond:
            for body in bodies:
                if len(self._queue) >= MAX_QUEUED:
                    self._queue.popleft()
                    self.dropped += 1
                    self._unsaid_drops += 1
                    if self._drops_said_at is None:
                        self._drops_said_at = self._clock()
                self._queue.append(body)
            line = self._drop_line()
            self._cond.notify_all()
        if line:
            self._report(line)

    def _drop_line(self, force: bool = False) -> str | None:
        """One line for the drops of an interval (a storm would otherwise print one per alert);
        called with the lock held."""
        start = self._drops_said_at
        if start is None or not (force or self._clock() - start >= self._drop_interval):
            return None
        count, self._unsaid_drops = self._unsaid_drops, 0
        self._drops_said_at = self._clock() if count and not force else None
        if not count:
            return None
        return f"notify: {count} alerts dropped: queue full ({self.shown_url})"

    def counts(self) -> dict[str, int]:
        """Posts so far by outcome, every outcome named (a rate needs its zeros)."""
        values = (self.sent, self.failed, self.refused, self.dropped)
        return dict(zip(OUTCOMES, values, strict=True))

    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    def _run(self) -> None:
        try:
            self._loop()
        except Exception:  # a bug: said, never a silent end of notifications
            log.exception("notifier stopped")
            self._report("notify: stopped by an internal error; alerts are no longer posted")

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                while not self._queue and not self._stop.is_set():
                    self._cond.wait()
                if self._stop.is_set():
                    return
                body = self._queue[0]
                line = self._drop_line()
            if line:
                self._report(line)
            if self._deliver(body):
                with self._cond:
                    if self._queue and self._queue[0] is body:
                        self._queue.popleft()

    def _deliver(self, body: Mapping[str, Any]) -> bool:
        """Post until it is accepted or refused for good (or the notifier closes), backing off
        between tries; True when it leaves the queue."""
        delay, failing = self._first, False
        data = json.dumps(body, allow_nan=False).encode()
        while not self._stop.is_set():
            outcome = post(self._target, self._headers, data, self._timeout)
            if outcome is None:
                self.sent += 1
                if failing:
                    self._report(f"notify: {self.shown_url} accepts posts again")
                return True
            problem, final = outcome
            if final:
                self.refused += 1
                self._report(f"notify: post to {self.shown_url} refused ({problem}); dropped")
                return True
            failing = True
            self.failed += 1
            self._report(
                f"notify: post to {self.shown_url} failed ({problem}); retry in {delay:g} s"
            )
            if self._stop.wait(delay):
                return False
            delay = min(delay * 2, self._max)
        return False
