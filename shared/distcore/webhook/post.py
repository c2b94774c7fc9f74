"""One webhook post under the HTTP client rule every outgoing post follows.

A post has one deadline for the whole exchange, not per read (a receiver sending a byte every
few seconds would otherwise hold it for ever), and is never redirected: the URL's credentials
would follow it to another host. A 3xx, like a 4xx other than 429, is a refusal that no retry
changes; anything else that is not a 2xx is worth another try. The words of a failure never
hold the URL.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

# Why a post did not go through, and whether that is final (no retry would change it); None:
# accepted.
Problem = tuple[str, bool]


def post(target: str, headers: Mapping[str, str], data: bytes, timeout: float) -> Problem | None:
    """POST `data` as JSON to `target` (a URL without `user:password@`: `headers` carries them)
    within `timeout` seconds in all."""
    request = urllib.request.Request(
        target, data=data, method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "distmon", **headers},
    )  # fmt: skip
    with _Deadline(timeout) as deadline:
        opener = urllib.request.build_opener(
            _NoRedirect, _HTTPHandler(deadline), _HTTPSHandler(deadline)
        )
        problem = _try(opener, request, timeout)
        if problem is not None and deadline.expired:
            return f"no answer in {timeout:g} s", False
        return problem


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


class _WatchedHTTPS(_WatchedHTTP, http.client.HTTPSConnection):
    """The same over TLS: HTTPSConnection.connect comes first in the chain, so the deadline
    watches the wrapped socket."""


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


def _try(
    opener: urllib.request.OpenerDirector, request: urllib.request.Request, timeout: float
) -> Problem | None:
    try:
        with opener.open(request, timeout=timeout) as response:
            _drain(response)
            return None
    except urllib.error.HTTPError as err:
        if 300 <= err.code < 400:
            return f"redirected with HTTP {err.code}, not followed", True
        return f"HTTP {err.code}", _final(err.code)
    except urllib.error.URLError as err:
        reason = err.reason
        if isinstance(reason, TimeoutError):
            return f"no answer in {timeout:g} s", False
        if isinstance(reason, OSError):
            return reason.strerror or type(reason).__name__, False
        return (type(reason).__name__ if not isinstance(reason, str) else "unreachable"), False
    except TimeoutError:
        return f"no answer in {timeout:g} s", False
    except OSError as err:
        return err.strerror or type(err).__name__, False
    except Exception as err:  # never the thread's end: one more failed try
        return type(err).__name__, False


def _drain(response: http.client.HTTPResponse) -> None:
    """The 2xx status is the receiver's word that it took the post: a body cut short (by the
    deadline or the receiver) does not undo it, and resending would post the alert twice."""
    with contextlib.suppress(OSError, http.client.HTTPException):
        response.read(65536)
