"""Real servers on 127.0.0.1 for the remote-source tests: an OpenSSH sshd started from a private
temporary directory (own host key, throwaway user key, own sshd_config, high port), and a client
`-F` config pointing at it. Nothing of the machine's own ssh configuration is read or changed."""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import psutil

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
HOST_ALIAS = "distmon-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0) -> None:
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

    def __init__(self, root: Path, remote_bin: Path | None = None) -> None:
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
            f"UsePAM no\nMaxSessions 32\nSetEnv PATH={path}\nLogLevel ERROR\n"
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

    def start(self) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
        self.process = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.root / "sshd.log", "ab"),  # noqa: SIM115 -- the child keeps it
        )  # fmt: skip
        wait_port(self.port)

    def stop(self) -> None:
        """Kill the listener and every per-connection process it forked (sessions setsid)."""
        if self.process is None:
            return
        try:
            family = [psutil.Process(self.process.pid)]
            family += family[0].children(recursive=True)
        except psutil.NoSuchProcess:
            family = []
        for proc in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(family, timeout=10)
        self.process.wait(timeout=10)
        self.process = None


def sshd_available() -> bool:
    return os.path.exists(SSHD) and shutil.which("ssh") is not None
