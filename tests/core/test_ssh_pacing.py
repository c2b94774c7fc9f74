"""An idle ssh host is refreshed less often (the wait doubles up to a cap while its listings stay
the same), and a change there is still seen: the rule as a table, then over a real sshd."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from distcore.events.store import RunStore
from distcore.remote import RemoteProducers
from distcore.remote.spec import SshSpec
from distcore.remote.ssh import SshConnection
from distcore.remote.ssh_logdir import QUIET_CAP, SshLogdirReader, quiet_wait
from distmon.options import Options
from distmon.producers import Producers, ProducerSet
from tests.core.test_remote_ssh import append, halves, steps_of
from tests.kit.sshd import HOST_ALIAS, Sshd
from tests.kit.wait import wait_until
from tests.kit.writers import write_scalars

MakeReader = Callable[[Path, RunStore, float], SshLogdirReader]  # logdir, store, quiet cap


@pytest.mark.parametrize(
    ("previous", "changed", "interval", "cap", "expected"),
    [
        (0.0, False, 1.0, 10.0, 1.0),  # the first refresh (or one after a wake): the interval
        (0.0, True, 1.0, 10.0, 1.0),
        (1.0, False, 1.0, 10.0, 2.0),  # quiet: doubled
        (2.0, False, 1.0, 10.0, 4.0),
        (8.0, False, 1.0, 10.0, 10.0),  # ... up to the cap
        (10.0, False, 1.0, 10.0, 10.0),
        (10.0, True, 1.0, 10.0, 1.0),  # anything changed: the interval at once
        (4.0, True, 1.0, 10.0, 1.0),
        (0.5, False, 1.0, 10.0, 1.0),  # a wait below the interval (a wake) starts again
        (30.0, False, 30.0, 10.0, 30.0),  # --refresh above the cap: its own pace, never faster
        (30.0, True, 30.0, 10.0, 30.0),
        (0.1, False, 0.1, 10.0, 0.2),
        (6.4, False, 0.1, 10.0, 10.0),
    ],
)
def test_quiet_wait(
    previous: float, changed: bool, interval: float, cap: float, expected: float
) -> None:
    assert quiet_wait(previous, changed, interval=interval, cap=cap) == expected


def test_the_default_cap_is_what_the_readme_and_docs_promise() -> None:
    assert QUIET_CAP == 10.0


@pytest.fixture
def reader_for(tmp_path: Path, sshd: Sshd) -> Iterator[MakeReader]:
    made: list[tuple[SshLogdirReader, SshConnection]] = []

    def make(logdir: Path, store: RunStore, cap: float) -> SshLogdirReader:
        conn = SshConnection(HOST_ALIAS, ssh_config=sshd.config)
        reader = SshLogdirReader(conn, HOST_ALIAS, [SshSpec(HOST_ALIAS, None, str(logdir))],
                                 store, interval=0.1, quiet_cap=cap)  # fmt: skip
        made.append((reader, conn))
        reader.start()
        return reader

    yield make
    for reader, conn in made:
        reader.close()
        conn.close()


@pytest.mark.slow
def test_a_change_after_a_long_quiet_period_is_seen(tmp_path: Path, reader_for: MakeReader) -> None:
    logdir = tmp_path / "runs"
    write_scalars(logdir / "a", halves(range(3)))
    store = RunStore()
    reader = reader_for(logdir, store, 1.6)
    wait_until(lambda: steps_of(store, f"{HOST_ALIAS}:a") == [0, 1, 2])
    wait_until(lambda: reader.wait == 1.6)  # quiet for 0.1 + 0.2 + 0.4 + 0.8 s: at the cap
    quiet = reader.refreshes
    wait_until(lambda: reader.refreshes >= quiet + 2)
    assert reader.wait == 1.6  # it stays there while nothing changes
    append(logdir / "a", [(10, 1.0)])
    wait_until(lambda: 10 in steps_of(store, f"{HOST_ALIAS}:a"))
    wait_until(lambda: reader.wait < 1.6)  # the refresh that saw it went back to the interval
    assert reader.errors() == ()


@pytest.mark.slow
def test_a_reload_wakes_a_quiet_host_at_once(tmp_path: Path, reader_for: MakeReader) -> None:
    logdir = tmp_path / "runs"
    write_scalars(logdir / "a", halves(range(3)))
    store = RunStore()
    reader = reader_for(logdir, store, 600.0)
    wait_until(lambda: steps_of(store, f"{HOST_ALIAS}:a") == [0, 1, 2])
    wait_until(lambda: reader.wait >= 6.4)  # ~6 s of quiet: the next refresh is >= 6.4 s away
    due = reader.due  # when the timer would refresh it
    append(logdir / "a", [(10, 1.0)])
    # What the dashboard's `r` runs (action_reload -> _rescan): a reload of the producers.
    made = Producers(store, remote=RemoteProducers((reader,), ()))
    scans: list[str | None] = []
    producers = ProducerSet(made, Options(logdirs=(), no_gpu=True))
    producers.timed_scan(lambda _seconds, error: scans.append(error))
    assert scans == [None]
    wait_until(lambda: 10 in steps_of(store, f"{HOST_ALIAS}:a"))
    assert time.monotonic() < due, "seen only by the timer: the wake did not refresh the host"
    wait_until(lambda: reader.wait < 1.0)  # and it is back at the interval
