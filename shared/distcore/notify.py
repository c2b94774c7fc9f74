"""Alerts that reach a person: each new alert at or above a level, posted once to a webhook.

`new_alerts` is the pure part: which alerts of a snapshot were not active at the previous one
(an alert is "the same" while its key stays: kind, run, and for GPU alerts host and GPU; one
that clears and returns is new again).
`Notifier` takes snapshots from any thread (it only queues), and posts on its own thread, in
order, retrying each failed post with capped exponential backoff; a hung receiver costs one
timeout per try and never blocks the caller. The payload is JSON with a Slack-compatible `text`
and the alert's own fields. The URL is a secret (Slack's webhook is its path, others carry
tokens in the query or user:password@): only `redact_url` of it is ever printed.
"""

from __future__ import annotations

import base64
import collections
import json
import logging
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from distcore.alerts import SEVERITY_ORDER, Alert, AlertKey
from distcore.errors import DistmonError
from distcore.jobs.snapshots import JobsSnapshot
from distcore.textsafe import json_safe

log = logging.getLogger(__name__)
LEVELS: Final = ("info", "warning", "critical")
TIMEOUT_SECONDS: Final = 10.0  # one post; a hung receiver is retried after it
FIRST_BACKOFF: Final = 1.0
MAX_BACKOFF: Final = 300.0
MAX_QUEUED: Final = 1000  # beyond this the oldest waiting notification is dropped (and logged)
_SLACK_ESCAPES: Final = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def redact_url(url: str) -> str:
    """The URL as it may be printed: scheme, host and port only (user, password, path, query
    and fragment may all be credentials)."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname or "?", parts.port
    except ValueError:
        return "<invalid URL>"
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{port}" if port is not None else ""
    rest = "/…" if parts.path.strip("/") or parts.query or parts.fragment else ""
    return f"{parts.scheme}://{netloc}{rest}"


def check_url(url: str) -> str:
    """A webhook URL, or a DistmonError (one line, the URL redacted) saying what is wrong."""
    try:
        parts = urllib.parse.urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise DistmonError(
            f"--notify: expected an http:// or https:// URL with a host, got {redact_url(url)}"
        )
    return url


def split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """urllib does not send `user:password@` itself: the URL without it, and the Basic
    Authorization header that carries it."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, {}
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    netloc = parts.netloc.rpartition("@")[2]
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return parts._replace(netloc=netloc).geturl(), {"Authorization": f"Basic {token}"}


def check_level(level: str) -> str:
    if level not in LEVELS:
        raise DistmonError(f"--notify-level: expected one of {', '.join(LEVELS)}, got {level!r}")
    return level


def at_or_above(alert: Alert, level: str) -> bool:
    return SEVERITY_ORDER.get(alert.severity, 99) <= SEVERITY_ORDER[level]


def new_alerts(
    previous: frozenset[AlertKey], alerts: Iterable[Alert], level: str
) -> tuple[list[Alert], frozenset[AlertKey]]:
    """The alerts at or above `level` whose key (`Alert.key`) was not active before, and the
    keys now active (the next call's `previous`)."""
    found: list[Alert] = []
    active: set[AlertKey] = set()
    for alert in alerts:
        if not at_or_above(alert, level):
            continue
        key = alert.key
        if key not in previous and key not in active:
            found.append(alert)
        active.add(key)
    return found, frozenset(active)


def _slack(text: str) -> str:
    """Slack reads &, < and > as markup (links, mentions): escaped as its docs say."""
    return "".join(_SLACK_ESCAPES.get(c, c) for c in text)


def payload(alert: Alert, job: str | None, host: str) -> dict[str, Any]:
    """The JSON body: `text` for Slack (and Mattermost, Rocket.Chat, Teams' incoming hooks),
    then the alert's fields for any other receiver (`host` and `gpu` are the alert's: what a GPU
    alert is about), and `distmon_host`, where distmon runs; valid JSON whatever the names
    held."""
    where = alert.run or alert.host or "all jobs"
    text = f"[{alert.severity}] {where}: {alert.message} (distmon on {host})"
    body = {"text": _slack(text), **alert.to_json(), "job": job, "distmon_host": host,
            "source": "distmon"}  # fmt: skip
    return dict(json_safe(body))


class Notifier:
    """Posts new alerts to `url` on its own thread. `observe` (from the index's thread) only
    computes what is new and queues it."""

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
    ) -> None:
        self.url, self.level = check_url(url), check_level(level)
        self.shown_url = redact_url(url)
        self._target, self._headers = split_credentials(url)
        self._timeout, self._first, self._max = timeout, first_backoff, max_backoff
        self._report, self._host = report, hostname or socket.gethostname()
        self._active: frozenset[AlertKey] = frozenset()
        self._queue: collections.deque[dict[str, Any]] = collections.deque()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.sent = 0  # delivered posts (for tests and the status line)
        self.dropped = 0

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

    def observe(self, snap: JobsSnapshot) -> None:
        """Queue the snapshot's new alerts; never blocks on the network."""
        job_of = {r.name: j.name for j in snap.jobs for r in j.parts.values()}
        job_of.update({j.name: j.name for j in snap.jobs})
        found, self._active = new_alerts(self._active, snap.alerts, self.level)
        bodies = [payload(a, job_of.get(a.run or ""), self._host) for a in found]
        with self._cond:
            for body in bodies:
                if len(self._queue) >= MAX_QUEUED:
                    self._queue.popleft()
                    self.dropped += 1
                    self._report(f"notify: queue full, dropped the oldest ({self.shown_url})")
                self._queue.append(body)
            self._cond.notify_all()

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
            if self._deliver(body):
                with self._cond:
                    if self._queue and self._queue[0] is body:
                        self._queue.popleft()

    def _deliver(self, body: Mapping[str, Any]) -> bool:
        """Post until it is accepted (or the notifier closes), backing off between tries."""
        delay, failing = self._first, False
        data = json.dumps(body, allow_nan=False).encode()
        while not self._stop.is_set():
            problem = self._post(data)
            if problem is None:
                self.sent += 1
                if failing:
                    self._report(f"notify: {self.shown_url} accepts posts again")
                return True
            failing = True
            self._report(
                f"notify: post to {self.shown_url} failed ({problem}); retry in {delay:g} s"
            )
            if self._stop.wait(delay):
                return False
            delay = min(delay * 2, self._max)
        return False

    def _post(self, data: bytes) -> str | None:
        """One try: None when accepted (2xx), else why not in words that never hold the URL."""
        request = urllib.request.Request(
            self._target, data=data, method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "distmon", **self._headers},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                response.read(65536)
                return None
        except urllib.error.HTTPError as err:
            return f"HTTP {err.code}"
        except urllib.error.URLError as err:
            reason = err.reason
            if isinstance(reason, TimeoutError):
                return f"no answer in {self._timeout:g} s"
            if isinstance(reason, OSError):
                return reason.strerror or type(reason).__name__
            return type(reason).__name__ if not isinstance(reason, str) else "unreachable"
        except TimeoutError:
            return f"no answer in {self._timeout:g} s"
        except OSError as err:
            return err.strerror or type(err).__name__
        except Exception as err:  # never the thread's end: one more failed try
            return type(err).__name__
