"""Alerts that reach a person: each new alert at or above a level, posted once to a webhook.

`new_alerts` is the pure part: which alerts of a snapshot were not active at the previous one
(an alert is "the same" while its key stays: kind, run, and for GPU alerts host and GPU; one
that clears and returns is new again).
`Notifier` takes snapshots from any thread (it only queues), and posts on its own thread, in
order, retrying each failed post with capped exponential backoff; a hung or dribbling receiver
costs one deadline per try (for the whole post, not per read) and never blocks the caller. A post
is never redirected (the URL's credentials would follow it to another host): a 3xx, like a 4xx
other than 429, is a refusal that no retry changes, so it is dropped, counted and said once.
The payload is JSON with a Slack-compatible `text` and the alert's own fields. The URL is a
secret (Slack's webhook is its path, others carry tokens in the query or user:password@): only
`redact_url` of it is ever printed.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import functools
import http.client
import json
import logging
import socket
import threading
import time
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
TIMEOUT_SECONDS: Final = 10.0  # one whole post; a hung receiver is retried after it
FIRST_BACKOFF: Final = 1.0
MAX_BACKOFF: Final = 300.0
MAX_QUEUED: Final = 1000  # beyond this the oldest waiting notification is dropped (and counted)
DROP_REPORT_SECONDS: Final = 60.0  # an alert storm's drops are said once per this, in one line
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


class _Deadline:
    """Ends a post at its deadline by shutting its sockets: a socket timeout is per read, so a
    receiver sending a byte every few seconds would otherwise hold one post for ever."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:  # connected just as time ran out
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    """Wakes a read blocked on `sock` in another thread (close alone would not)."""
    with contextlib.suppress(OSError):  # already closed: nothing is waiting on it
        sock.shutdown(socket.SHUT_RDWR)


class _WatchedHTTP(http.client.HTTPConnection):
    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        super().connect()
        self._deadline.watch(self.sock)


class _WatchedHTTPS(http.client.HTTPSConnection):
    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        super().connect()
        self._deadline.watch(self.sock)


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_WatchedHTTP, deadline=self._deadline), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_WatchedHTTPS, deadline=self._deadline), req)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx comes back as an HTTPError: following it would resend the body and the URL's
    credentials to wherever the receiver points."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _final(code: int) -> bool:
    """An answer no retry changes: a redirect (never followed) or a 4xx other than 429."""
    return 300 <= code < 400 or (400 <= code < 500 and code != 429)


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
        drop_report_interval: float = DROP_REPORT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
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
        self.dropped = 0  # queue full
        self.refused = 0  # redirected or a 4xx other than 429: dropped, not retried
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
        found, self._active = new_alerts(self._active, snap.alerts, self.level)
        bodies = [payload(a, job_of.get(a.run or ""), self._host) for a in found]
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
            outcome = self._post(data)
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
            self._report(
                f"notify: post to {self.shown_url} failed ({problem}); retry in {delay:g} s"
            )
            if self._stop.wait(delay):
                return False
            delay = min(delay * 2, self._max)
        return False

    def _post(self, data: bytes) -> tuple[str, bool] | None:
        """One try: None when accepted (2xx), else why not, in words that never hold the URL,
        and whether that is final (no retry would change it)."""
        request = urllib.request.Request(
            self._target, data=data, method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "distmon", **self._headers},
        )  # fmt: skip
        with _Deadline(self._timeout) as deadline:
            opener = urllib.request.build_opener(
                _NoRedirect, _HTTPHandler(deadline), _HTTPSHandler(deadline)
            )
            problem = self._try(opener, request)
            if problem is not None and deadline.expired:
                return f"no answer in {self._timeout:g} s", False
            return problem

    def _try(
        self, opener: urllib.request.OpenerDirector, request: urllib.request.Request
    ) -> tuple[str, bool] | None:
        try:
            with opener.open(request, timeout=self._timeout) as response:
                _drain(response)
                return None
        except urllib.error.HTTPError as err:
            if 300 <= err.code < 400:
                return f"redirected with HTTP {err.code}, not followed", True
            return f"HTTP {err.code}", _final(err.code)
        except urllib.error.URLError as err:
            reason = err.reason
            if isinstance(reason, TimeoutError):
                return f"no answer in {self._timeout:g} s", False
            if isinstance(reason, OSError):
                return reason.strerror or type(reason).__name__, False
            return (type(reason).__name__ if not isinstance(reason, str) else "unreachable"), False
        except TimeoutError:
            return f"no answer in {self._timeout:g} s", False
        except OSError as err:
            return err.strerror or type(err).__name__, False
        except Exception as err:  # never the thread's end: one more failed try
            return type(err).__name__, False


def _drain(response: http.client.HTTPResponse) -> None:
    """The 2xx status is the receiver's word that it took the post: a body cut short (by the
    deadline or the receiver) does not undo it, and resending would post the alert twice."""
    with contextlib.suppress(OSError, http.client.HTTPException):
        response.read(65536)
