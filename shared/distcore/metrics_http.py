"""`/metrics` over HTTP, with bounds: what `distmon --serve --metrics` listens with.

prometheus_client's own server gives each connection a thread for as long as the client keeps
it open, with no timeout: idle connections held every thread and descriptor they wanted, and at
the process's open-file limit neither scrapes nor the GPU sampler could open anything. Here the
same WSGI app (`make_wsgi_app`: its formats, compression and name filters) is served with:

- at most `max_connections` at once (`MAX_CONNECTIONS`, and never over a quarter of the
  open-file limit). At the bound a new connection takes the place of the one that has waited
  longest without sending its request, which is hung up; where every one is being answered,
  the new one is closed at once. A flood of idle connections then displaces only itself, and
  a scrape, which sends its request as it connects, is answered.
- `idle_timeout` seconds to send the whole request (not per read: a client sending a byte at a
  time would keep its connection for ever), and again to take the answer: an idle, slow or
  stalled client loses its connection and its thread.
- a pause after `accept` fails for want of descriptors (the listening socket stays readable,
  and the accept loop would spin a core), and no traceback for what clients do (resets, time-
  outs): those are theirs, not distmon's.
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import resource
import socket
import sys
import threading
import time
from socketserver import ThreadingMixIn
from types import TracebackType
from typing import IO, TYPE_CHECKING, Final, cast
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer

from prometheus_client import make_wsgi_app
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

log = logging.getLogger(__name__)

MAX_CONNECTIONS: Final = 64
IDLE_TIMEOUT: Final = 10.0  # seconds
# A burst of connections waits in the kernel (up to somaxconn) for its turn, not in a 1 s SYN
# retry: at 128 a flood of 1,000 cost some connections, a scrape among them, a second each.
LISTEN_BACKLOG: Final = 1024
ACCEPT_PAUSE: Final = 0.1  # seconds, after accept found no descriptor free
HANG_UP_WAIT: Final = 1.0  # seconds the accept loop waits for a hung-up connection's thread
_OUT_OF_DESCRIPTORS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
ExcInfo = tuple[type[BaseException], BaseException, TracebackType]


def connection_limit(bound: int = MAX_CONNECTIONS) -> int:
    """`bound`, or a quarter of the open-file limit where that is less: the connections alone
    can never take the descriptors the readers and the sampler need."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return bound if soft == resource.RLIM_INFINITY else max(1, min(bound, soft // 4))


class _Answer(ServerHandler):
    def log_exception(self, exc_info: ExcInfo) -> None:  # type: ignore[override]
        if not isinstance(exc_info[1], OSError):  # a client gone or too slow is no bug
            log.error("metrics: a scrape failed", exc_info=exc_info)


class _Until(io.RawIOBase):
    """The request's bytes, every one before `deadline` (a socket's timeout is per read)."""

    def __init__(self, conn: socket.socket, deadline: float) -> None:
        self._conn, self._deadline = conn, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no whole request in time")
        self._conn.settimeout(left)
        return self._conn.recv_into(buffer)


class _Request(WSGIRequestHandler):
    server: MetricsServer

    def setup(self) -> None:
        super().setup()
        deadline = time.monotonic() + self.server.idle_timeout
        self.rfile.close()  # the socket's reader, replaced by one bound by the deadline
        self.rfile = io.BufferedReader(_Until(self.connection, deadline))

    def handle(self) -> None:
        """wsgiref's one request per connection, which tells the server once the request is
        read (from then on the connection is being answered, never displaced)."""
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline, self.request_version, self.command = "", "", ""
            self.send_error(414)
            return
        if not self.parse_request():  # an error was sent
            return
        self.server.answering(self.request)
        self.connection.settimeout(self.server.idle_timeout)  # to take the whole answer
        app = self.server.get_app()
        assert app is not None  # set before serving
        answer = _Answer(self.rfile, cast(IO[bytes], self.wfile), self.get_stderr(),
                         self.get_environ(), multithread=False)  # fmt: skip
        answer.request_handler = self  # type: ignore[attr-defined]  # wsgiref's back pointer
        answer.run(app)

    def log_message(self, format: str, *args: object) -> None:
        """Nothing per request: a scrape every 15 s would fill the service's log."""


class MetricsServer(ThreadingMixIn, WSGIServer):
    """A thread per connection, at most `max_connections` of them (see the module)."""

    daemon_threads = True
    block_on_close = False  # close() hangs up instead: an idle client never delays an exit
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self, address: tuple[str, int], family: socket.AddressFamily, *,
        max_connections: int, idle_timeout: float,
    ) -> None:  # fmt: skip
        self.address_family = family
        self.max_connections, self.idle_timeout = max_connections, idle_timeout
        self._lock = threading.Lock()
        self._ended = threading.Condition(self._lock)  # a hung-up connection's thread ended
        # Open connections, oldest first, each True while its request is still awaited; and
        # those hung up whose thread has not ended yet (threads stay under 2 x the bound).
        self._open: dict[socket.socket, bool] = {}
        self._hung_up: set[socket.socket] = set()
        super().__init__(address, _Request)

    def held(self) -> int:
        """Connections open now, those being hung up included (for tests)."""
        with self._lock:
            return len(self._open) + len(self._hung_up)

    def answering(self, conn: socket.socket) -> None:
        with self._lock:
            if conn in self._open:
                self._open[conn] = False

    def get_request(self) -> tuple[socket.socket, object]:
        try:
            return super().get_request()
        except OSError as err:
            if err.errno in _OUT_OF_DESCRIPTORS:  # socketserver drops it; we only pause
                time.sleep(ACCEPT_PAUSE)
            raise

    def process_request(self, request: object, client_address: object) -> None:
        conn = request
        assert isinstance(conn, socket.socket)
        with self._lock:
            admitted = self._admit(conn)
        if not admitted:
            self.shutdown_request(conn)
            return
        super().process_request(conn, client_address)

    def _admit(self, conn: socket.socket) -> bool:
        # Threads of hung-up connections end as soon as they run: on a loaded machine that can
        # take a while, and refusing meanwhile cost a scrape its answer.
        bound = self.max_connections
        if not self._ended.wait_for(
                lambda: len(self._open) < bound or len(self._hung_up) < bound,
                timeout=HANG_UP_WAIT):
            return False
        if len(self._open) < bound:
            self._open[conn] = True
            return True
        waiting = next((c for c, awaited in self._open.items() if awaited), None)
        if waiting is None:  # every one is being answered
            return False
        del self._open[waiting]
        self._hung_up.add(waiting)
        _hang_up(waiting)  # under the lock: its thread cannot close it (and free its number)
        self._open[conn] = True
        return True

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        with self._lock:
            super().shutdown_request(request)
            self._open.pop(request, None)
            self._hung_up.discard(request)
            self._ended.notify_all()

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that resets or stalls is its own affair; anything else is a bug, logged."""
        if not isinstance(sys.exc_info()[1], OSError):
            log.exception("metrics: a connection failed")

    def close(self) -> None:
        """Stop accepting, hang up every connection, release the port."""
        self.shutdown()
        with self._lock:
            for conn in self._open:
                _hang_up(conn)
        self.server_close()


def _hang_up(conn: socket.socket) -> None:
    """End the connection under its thread, which wakes from its read and closes it."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


def start_metrics_server(
    host: str, port: int, registry: Collector, *, max_connections: int | None = None,
    idle_timeout: float = IDLE_TIMEOUT,
) -> MetricsServer:  # fmt: skip
    """Serve `registry` at http://host:port/ on a thread of its own (an IPv6 host binds an IPv6
    socket); OSError when it cannot listen."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, sockaddr = infos[0]
    server = MetricsServer((str(sockaddr[0]), port), family,
                           max_connections=max_connections or connection_limit(),
                           idle_timeout=idle_timeout)  # fmt: skip
    server.set_app(make_wsgi_app(registry))
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server
