"""Real servers on 127.0.0.1 for the remote-source tests: an OpenSSH sshd started from a private
temporary directory (own host key, throwaway user key, own sshd_config, high port), and a client
`-F` config pointing at it. Nothing of the machine's own ssh configuration is read or changed."""

from __future__ import annotations

import contextlib
import getpass
import os
import selectors
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
HOST_ALIAS = "distmon-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


def keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip


class Sshd:
    """sshd -D -e on a high loopback port; stop() kills it with every session it forked."""

    def __init__(
        self, root: Path, remote_bin: Path | None = None, home: Path | None = None
    ) -> None:
        """`home`: the sessions' $HOME (sshd's SetEnv overrides the account's), so their shell
        reads that folder's rc files: hosts whose logins cost what their own rc files cost, not
        this machine's (the many-hosts bench, where 100 aliases of one machine would otherwise
        all wait on one pyenv lock in the same rc file)."""
        self.root = root
        self.port = free_port()
        self.user = getpass.getuser()
        keygen(root / "host_key")
        keygen(root / "user_key")
        keygen(root / "stranger_key")  # a key the server does not know
        shutil.copy(root / "user_key.pub", root / "authorized_keys")
        path = f"{remote_bin}:/usr/local/bin:/usr/bin:/bin" if remote_bin else "/usr/bin:/bin"
        (root / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {root}/host_key\n"
            f"PidFile {root}/sshd.pid\nAuthorizedKeysFile {root}/authorized_keys\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nStrictModes no\n"
            f"UsePAM no\nMaxSessions 32\nSetEnv PATH={path}{f' HOME={home}' if home else ''}\n"
            "LogLevel ERROR\n"
        )
        host_pub = (root / "host_key.pub").read_text().split()[:2]
        (root / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {' '.join(host_pub)}\n")
        self.config = self.client_config("user_key", "config")
        self.process: subprocess.Popen[bytes] | None = None

    def client_config(self, key: str, name: str) -> Path:
        path = self.root / name
        path.write_text(
            f"Host {HOST_ALIAS}\n  HostName 127.0.0.1\n  Port {self.port}\n  User {self.user}\n"
            f"  IdentityFile {self.root}/{key}\n  IdentitiesOnly yes\n  IdentityAgent none\n"
            f"  UserKnownHostsFile {self.root}/known_hosts\n  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
        )
        return path

    def jump_config(self, name: str = "jump_config") -> Path:
        """A config whose `distmon-jumped` host is reached through `distmon-test` (ProxyJump)."""
        path = self.client_config("user_key", name)
        text = path.read_text()
        jumped = text.replace(f"Host {HOST_ALIAS}\n", "Host distmon-jumped\n", 1)
        path.write_text(
            text
            + jumped.replace(
                "  StrictHostKeyChecking", f"  ProxyJump {HOST_ALIAS}\n  StrictHostKeyChecking", 1
            )
        )
        return path

    def start(self) -> None:
        # sshd refuses to start without its privilege separation directory (the package's
        # service creates it at boot); a non-root user cannot, and sshd_available() says so.
        with contextlib.suppress(PermissionError):
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.process = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.root / "sshd.log", "ab"),  # noqa: SIM115 -- the child keeps it
        )  # fmt: skip
        wait_port(self.port)

    def stop(self) -> None:
        """Kill the listener and every per-connection sshd it forked (they call setsid, so a
        process group would miss them). The sessions' shells are left to see their connection
        close and exit by themselves: killing a login shell mid-startup can leave its rc files'
        locks behind (pyenv's rehash lock, here), which would stall every later shell."""
        if self.process is None:
            return
        family = []
        with contextlib.suppress(psutil.NoSuchProcess):
            listener = psutil.Process(self.process.pid)
            family = [listener, *listener.children(recursive=True)]
        family = [p for p in family if _is_sshd(p)]
        for proc in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(family, timeout=10)
        self.process.wait(timeout=10)
        self.process = None


def _is_sshd(proc: psutil.Process) -> bool:
    try:
        return proc.name().startswith("sshd")
    except psutil.NoSuchProcess:
        return False


def sshd_available() -> bool:
    privsep = os.path.isdir("/run/sshd") or os.access("/run", os.W_OK)
    return os.path.exists(SSHD) and shutil.which("ssh") is not None and privsep


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
