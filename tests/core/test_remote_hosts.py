"""Many ssh hosts from one machine: `Host` aliases of one real sshd on 127.0.0.1 and
one host that accepts TCP but never answers, read as the dashboard reads them (every reader
started at once). Handshakes are bounded and each host has its own thread: the dead host's
handshake is still pending while every other host's run is already in the store."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from distcore.events.store import RunStore
from distcore.remote import make_remote_producers
from distcore.remote.spec import SshSpec
from distcore.remote.ssh import MAX_HANDSHAKES
from tests.kit.sshd import HOST_ALIAS, Sshd, started_sshd
from tests.kit.wait import wait_until
from tests.kit.writers import scalar_records

pytestmark = pytest.mark.slow
HOSTS = 12


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    """The sessions read an empty $HOME's rc files: 13 logins into this machine's account would
    each wait on its rc files' shared locks (pyenv's), which 13 real hosts would not."""
    (tmp_path / "home").mkdir()
    with started_sshd(tmp_path, home=tmp_path / "home") as server:
        yield server


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A port that accepts connections into its backlog and never says a word (a hung host)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


def aliases(sshd: Sshd, hole: int) -> Path:
    block = sshd.config.read_text()
    text = block + "".join(
        block.replace(f"Host {HOST_ALIAS}\n", f"Host h{i:02d}\n", 1) for i in range(HOSTS)
    )
    text += block.replace(f"Host {HOST_ALIAS}\n", "Host dead\n", 1).replace(
        f"Port {sshd.port}\n", f"Port {hole}\n"
    )
    path = sshd.root / "many_config"
    path.write_text(text)
    return path


def test_a_dead_host_delays_no_other(sshd: Sshd, black_hole: int, tmp_path: Path) -> None:
    assert HOSTS > MAX_HANDSHAKES  # more hosts than handshakes at once: some wait their turn
    specs = [SshSpec("dead", None, str(tmp_path))]  # first in line
    for i in range(HOSTS):
        run = tmp_path / "logs" / f"h{i:02d}" / "run"
        run.mkdir(parents=True)
        (run / "events.out.tfevents.1.h").write_bytes(scalar_records("loss", [(i, 1.0)]))
        specs.append(SshSpec(f"h{i:02d}", None, str(tmp_path / "logs" / f"h{i:02d}")))
    store = RunStore()
    # A long connect timeout: the dead host is still "connecting" when the others are read,
    # however loaded the machine.
    remote = make_remote_producers(
        specs, store, refresh=0.5, ssh_config=aliases(sshd, black_hole), gpus=False,
        connect_timeout=120,
    )  # fmt: skip
    remote.start()
    try:
        expected = {f"h{i:02d}:run" for i in range(HOSTS)}
        wait_until(lambda: expected <= {r.name for r in store.snapshot()}, timeout=90)
        dead = remote.producers[0].connection  # type: ignore[attr-defined]
        assert dead.destination == "dead"
        assert dead.connects == 0 and dead.down_since is None  # its handshake still pending
        assert all(p.connection.connects == 1 for p in remote.producers[1:])  # type: ignore[attr-defined]
        # What the index asks every refresh answers now, not after the dead host's handshake.
        hosts = {h.key: h for h in remote.hosts()}
        assert remote.errors() == ()
        assert set(hosts) == {"ssh:dead", *(f"ssh:h{i:02d}" for i in range(HOSTS))}
        assert all(hosts[f"ssh:h{i:02d}"].error is None for i in range(HOSTS))
    finally:
        remote.close()  # ends the pending handshake too (the thread-leak guard checks)
