"""Real object-store servers on 127.0.0.1 for the remote-source tests (moto's S3, a GCS
emulator) and a byte-counting TCP relay; the sshd is the kit's (tests/kit/sshd.py)."""

from __future__ import annotations

import contextlib
import selectors
import socket
import subprocess
import sys
import threading
from pathlib import Path

from tests.kit.net import free_port, wait_port


class ServerProcess:
    """A server command on a free loopback port, stopped (and waited for) at close()."""

    def __init__(self, argv_for_port: list[str], port: int, log: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            argv_for_port, stdin=subprocess.DEVNULL, stdout=open(log, "ab"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_port(port, timeout=60)
        except TimeoutError:
            self.close()
            raise

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def moto_server(log: Path) -> ServerProcess:
    """A real S3 API server: moto in server mode."""
    port = free_port()
    exe = Path(sys.executable).with_name("moto_server")
    return ServerProcess([str(exe), "-H", "127.0.0.1", "-p", str(port)], port, log)


def gcs_emulator(log: Path) -> ServerProcess:
    port = free_port()
    exe = Path(sys.executable).with_name("gcp-storage-emulator")
    argv = [str(exe), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory", "-q"]
    return ServerProcess(argv, port, log)


class CountingProxy:
    """A TCP relay on 127.0.0.1 that counts the bytes the server sends to the client: the
    server-side figure for "bytes transferred", independent of the client's own bookkeeping.
    One thread with a selector; close() stops it and every connection."""

    def __init__(self, target_port: int) -> None:
        self._target = target_port
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.setblocking(False)
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.downstream = 0  # server -> client bytes
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="test-counting-proxy")
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=0.1):
                if key.data is None:
                    self._accept()
                else:
                    self._relay(key.fileobj, *key.data)  # type: ignore[arg-type]

    def _accept(self) -> None:
        client, _ = self._listener.accept()
        server = socket.create_connection(("127.0.0.1", self._target))
        self._selector.register(client, selectors.EVENT_READ, (server, False))
        self._selector.register(server, selectors.EVENT_READ, (client, True))

    def _relay(self, source: socket.socket, sink: socket.socket, from_server: bool) -> None:
        try:
            data = source.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            for sock in (source, sink):
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(sock)
                sock.close()
            return
        if from_server:
            self.downstream += len(data)
        sink.sendall(data)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()
