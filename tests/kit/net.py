"""Loopback ports for the tests' real servers."""

from __future__ import annotations

import socket

from tests.kit.wait import wait_until


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick; a server binds it next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_port(port: int, timeout: float = 60.0) -> None:
    """Until something accepts connections on 127.0.0.1:`port`."""
    wait_until(lambda: listening(port), f"a listener on 127.0.0.1:{port}", timeout)
