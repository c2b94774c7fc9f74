"""One webhook receiver for the tests: a real HTTP(S) server on 127.0.0.1 (http.server) that
records each JSON body posted to it and can answer with 500s, hang, dribble its answer, redirect
or refuse; `receiver` is the fixture (closed after the test)."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

SECRET = "T000/B000/XXXXsecretXXXX"


class Receiver:
    """A webhook receiver: records each JSON body; `fail` answers that many posts with
    `fail_code`; `hang` holds each request until released; `dribble` sends its answer a byte
    every 0.2 s until released; `status` (with `location`) answers every post with it. With
    `tls` it speaks HTTPS."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.tries = 0
        self.auth: str | None = None
        self.fail = 0
        self.fail_code = 500
        self.status = 200
        self.location: str | None = None
        self.dribble = threading.Event()
        self.hang = threading.Event()  # set: requests wait on `release`
        self.release = threading.Event()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.auth = self.headers.get("Authorization")
                if receiver.hang.is_set():
                    receiver.release.wait(30)
                with receiver._lock:
                    receiver.tries += 1
                    failing = receiver.fail > 0
                    receiver.fail -= 1 if failing else 0
                    taken = not failing and receiver.status == 200
                    if taken and not receiver.dribble.is_set():
                        receiver.bodies.append(json.loads(body))
                if receiver.dribble.is_set():
                    self.send_slowly()
                    return
                self.send_response(receiver.fail_code if failing else receiver.status)
                if receiver.location is not None:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def send_slowly(self) -> None:
                """Each byte comes well within any read timeout; the answer never ends."""
                head = b"HTTP/1.1 200 OK\r\nX-Slow: "
                for i in range(100_000):
                    if receiver.release.wait(0.2):
                        return
                    try:
                        self.wfile.write(head[i : i + 1] if i < len(head) else b"a")
                        self.wfile.flush()
                    except OSError:
                        return

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, name="receiver")
        self.thread.start()
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://user:pw@127.0.0.1:{self.server.server_address[1]}/hooks/{SECRET}?t=1"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()
