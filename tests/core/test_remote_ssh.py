"""Remote logdirs and GPUs over SSH, against a real OpenSSH server the test starts on 127.0.0.1."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from distcore.events.store import RunStore
from distcore.remote import make_remote_producers
from distcore.remote.spec import SshSpec
from tests.kit.sshd import HOST_ALIAS, NO_SSHD, Sshd, sshd_available, started_sshd
from tests.kit.wait import wait_until
from tests.kit.writers import scalar_records, write_scalars

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not sshd_available(), reason=NO_SSHD
    ),
]
INTERVAL = 0.4



def append(run: Path, points: list[tuple[int, float]]) -> None:
    """Records appended to the run's event file, as a TF writer's next flush does."""
    (path,) = run.glob("*tfevents*")
    with path.open("ab") as f:
        f.write(scalar_records("loss", points))


def halves(steps: range) -> list[float]:
    """The values these tests write at `steps`: each step's half."""
    return [step * 0.5 for step in steps]


def steps_of(store: RunStore, name: str, tag: str = "loss") -> list[int]:
    run = store.get(name)
    if run is None or tag not in run.scalars:
        return []
    return [int(s) for s in run.scalars[tag].steps]


def test_runs_discovered_and_new_point_within_two_refreshes(sshd: Sshd, tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    write_scalars(logdir / "a", halves(range(5)))
    write_scalars(logdir / "b" / "train", halves(range(3)))
    store = RunStore()
    remote = make_remote_producers(
        [SshSpec(HOST_ALIAS, None, str(logdir))], store, refresh=INTERVAL, ssh_config=sshd.config
    )
    remote.start()
    try:
        # Both runs, each waited for: one refresh may read one run's bytes before the other's.
        wait_until(lambda: steps_of(store, f"{HOST_ALIAS}:a") == [0, 1, 2, 3, 4])
        wait_until(lambda: steps_of(store, f"{HOST_ALIAS}:b/train") == [0, 1, 2])
        run = store.get(f"{HOST_ALIAS}:a")
        assert run is not None and str(run.path) == f"{HOST_ALIAS}:{logdir}/a"
        reader = remote.producers[0]
        before = reader.refreshes  # type: ignore[attr-defined]
        append(logdir / "a", [(10, 1.0)])
        wait_until(lambda: 10 in steps_of(store, f"{HOST_ALIAS}:a"))
        assert reader.refreshes - before <= 2  # type: ignore[attr-defined]
        assert remote.errors() == ()
        # One connection for the host: listings and reads were sessions over it.
        assert reader.connection.connects == 1  # type: ignore[attr-defined]
    finally:
        remote.close()


def test_reconnects_after_server_restart_without_losing_points(sshd: Sshd, tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    write_scalars(logdir / "a", halves(range(4)))
    store = RunStore()
    remote = make_remote_producers(
        [SshSpec(HOST_ALIAS, None, str(logdir))], store, refresh=INTERVAL, ssh_config=sshd.config,
        gpus=False,
    )  # fmt: skip
    remote.start()
    try:
        wait_until(lambda: steps_of(store, f"{HOST_ALIAS}:a") == [0, 1, 2, 3])
        sshd.stop()
        wait_until(lambda: remote.errors(), timeout=30)
        (error,) = remote.errors()
        assert error.message.startswith(f"{HOST_ALIAS}: host unreachable since ")
        assert "\n" not in error.message
        assert steps_of(store, f"{HOST_ALIAS}:a") == [0, 1, 2, 3]  # kept what was read
        write_scalars(logdir / "a", halves(range(4, 6)), first_step=4)
        sshd.start()
        wait_until(lambda: steps_of(store, f"{HOST_ALIAS}:a") == [0, 1, 2, 3, 4, 5], timeout=60)
        assert remote.errors() == ()
        assert remote.producers[0].connection.connects == 2  # type: ignore[attr-defined]
    finally:
        remote.close()


def test_logdirs_on_one_host_share_one_connection(sshd: Sshd, tmp_path: Path) -> None:
    for logdir in ("exp1", "exp2", "other/exp1"):
        (tmp_path / logdir / "run").mkdir(parents=True)
        (tmp_path / logdir / "run" / "events.out.tfevents.1.h").write_bytes(
            scalar_records("loss", [(1, 1.0)])
        )
    store = RunStore()
    specs = [SshSpec(HOST_ALIAS, None, str(tmp_path / d)) for d in ("exp1", "exp2", "other/exp1")]
    remote = make_remote_producers(specs, store, ssh_config=sshd.config)
    try:
        assert remote.scan_once() == {
            f"{HOST_ALIAS}:exp1/run",
            f"{HOST_ALIAS}:exp2/run",
            f"{HOST_ALIAS}:exp1-2/run",
        }
        (reader,) = remote.producers
        (source,) = remote.host_sources
        source.sample_once()
        assert reader.connection.connects == 1  # type: ignore[attr-defined]
    finally:
        remote.close()


def test_a_jump_host_from_the_users_config(sshd: Sshd, tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "events.out.tfevents.1.h").write_bytes(scalar_records("loss", [(2, 1.0)]))
    store = RunStore()
    remote = make_remote_producers(
        [SshSpec("distmon-jumped", None, str(tmp_path))], store, ssh_config=sshd.jump_config(),
        gpus=False,
    )  # fmt: skip
    try:
        assert remote.scan_once() == {"distmon-jumped:r"}
        assert remote.errors() == ()
    finally:
        remote.close()


def test_replaced_and_truncated_files_are_read_again(sshd: Sshd, tmp_path: Path) -> None:
    run = tmp_path / "runs" / "a"
    run.mkdir(parents=True)
    path = run / "events.out.tfevents.1.h"
    path.write_bytes(scalar_records("loss", [(s, 1.0) for s in range(10)]))
    store = RunStore()
    remote = make_remote_producers(
        [SshSpec(HOST_ALIAS, None, str(tmp_path / "runs"))], store, ssh_config=sshd.config,
        gpus=False,
    )  # fmt: skip
    try:
        remote.scan_once()
        # Replaced (a new inode, as an atomic rename makes it), larger than what was read.
        new = tmp_path / "new"
        new.write_bytes(scalar_records("loss", [(s, 2.0) for s in range(3, 15)]))
        new.rename(path)
        remote.scan_once()
        loss = store.get(f"{HOST_ALIAS}:a").scalars["loss"]  # type: ignore[union-attr]
        assert list(loss.steps) == list(range(15)) and loss.values[3:] == (2.0,) * 12
        # Truncated in place and rewritten shorter: from the start again.
        with path.open("r+b") as f:
            f.truncate(0)
            f.write(scalar_records("loss", [(1, 3.0)]))
        remote.scan_once()
        loss = store.get(f"{HOST_ALIAS}:a").scalars["loss"]  # type: ignore[union-attr]
        assert list(loss.steps) == [0, 1] and loss.values == (1.0, 3.0)
    finally:
        remote.close()


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("wrong path", f"{HOST_ALIAS}:/no/such/logdir: no such directory"),
        ("refused key", f"{HOST_ALIAS}: host unreachable since "),
    ],
)
def test_wrong_path_and_refused_key_each_give_one_line(
    sshd: Sshd, tmp_path: Path, case: str, expected: str
) -> None:
    config = sshd.config
    path = str(tmp_path)
    if case == "wrong path":
        path = "/no/such/logdir"
    else:
        config = sshd.client_config("stranger_key", "stranger_config")
    store = RunStore()
    remote = make_remote_producers(
        [SshSpec(HOST_ALIAS, None, path)], store, refresh=INTERVAL, ssh_config=config, gpus=False
    )
    remote.scan_once()
    (error,) = remote.errors()
    assert error.message.startswith(expected), error.message
    if case == "refused key":
        assert error.message.endswith("Permission denied (publickey))")
    assert not remote.readable()
    remote.close()


def test_remote_gpus_from_one_long_running_nvidia_smi(sshd: Sshd, tmp_path: Path) -> None:
    store = RunStore()
    remote = make_remote_producers(
        [SshSpec(HOST_ALIAS, None, str(tmp_path))], store, refresh=0.2, ssh_config=sshd.config
    )
    remote.start()
    remote.start()  # idempotent: the app starts host sources, the index the readers
    try:
        (source,) = remote.host_sources
        wait_until(lambda: len(source.hosts()[0].gpus) == 2)
        (host,) = source.hosts()
        assert (host.key, host.name, host.source, host.error) == (
            f"ssh:{HOST_ALIAS}",
            HOST_ALIAS,
            "ssh",
            None,
        )
        first, second = host.gpus
        assert (first.index, first.name, first.utilization_gpu, first.memory_used_mib) == (
            0,
            "NVIDIA H100 80GB HBM3",
            87.0,
            61234.0,
        )
        assert (first.power_w, first.power_limit_w, first.sm_clock_mhz) == (512.33, 700.0, 1980.0)
        assert first.fan_percent is None and first.pcie_rx_kib_s is None
        assert second.utilization_gpu is None and second.utilization_memory is None
        assert second.temperature_c == 35.0 and second.fan_percent is None
        sampled = host.sampled_at
        wait_until(lambda: source.hosts()[0].sampled_at != sampled)  # it keeps sampling
        # One nvidia-smi process for all the samples, not one ssh per sample.
        # (This test's stand-in only: an earlier test's may linger until its next write.)
        stand_in = str(tmp_path / "remote-bin" / "nvidia-smi")
        procs = {pid: (ppid, cmd) for pid, (ppid, cmd) in _processes().items()
                 if stand_in in cmd and "-lms" in cmd}
        # The stand-in's `$(awk ...)` forks a copy of its shell for a moment: a process whose
        # parent is the stand-in is that, not a second nvidia-smi.
        own = [cmd for ppid, cmd in procs.values() if ppid not in procs]
        assert len(own) == 1, procs
    finally:
        remote.close()
        remote.close()


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process but shells and ssh."""
    out = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            if b"sh -c" not in cmd and b"ssh" not in cmd:
                ppid = int(stat.rsplit(")", 1)[1].split()[1])  # after "pid (comm) state"
                out[int(pid)] = (ppid, cmd.decode("utf-8", "replace"))
    return out


@pytest.mark.parametrize("tmpdir", ["with space", "per%cent%h", "long-" + "x" * 105])
def test_any_tmpdir(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmpdir: str
) -> None:
    """The master's socket never lands where ssh cannot take its path (blanks, `%` tokens,
    more than a Unix socket's 108 bytes)."""
    import tempfile

    odd = tmp_path / tmpdir
    odd.mkdir()
    monkeypatch.setenv("TMPDIR", str(odd))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    assert tempfile.gettempdir() == str(odd)
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "events.out.tfevents.1.h").write_bytes(scalar_records("loss", [(1, 1.0)]))
    store = RunStore()
    remote = make_remote_producers(
        [SshSpec(HOST_ALIAS, None, str(tmp_path))], store, ssh_config=sshd.config, gpus=False
    )
    try:
        assert remote.scan_once() == {f"{HOST_ALIAS}:r"}
        assert remote.errors() == ()
    finally:
        remote.close()


def test_a_host_without_nvidia_smi_says_so_and_closes_at_once(tmp_path: Path) -> None:
    """The GPU source's loop: nvidia-smi missing there is the host's reason (exit 127), the next
    try waits a minute (Loop.next_in), and a close during that wait ends the thread at once."""
    with started_sshd(tmp_path) as server:  # PATH=/usr/bin:/bin there: no stand-in nvidia-smi
        remote = make_remote_producers(
            [SshSpec(HOST_ALIAS, None, str(tmp_path))], RunStore(), refresh=0.2,
            ssh_config=server.config,
        )  # fmt: skip
        try:
            remote.start()
            (source,) = remote.host_sources
            reason = f"nvidia-smi not found on {HOST_ALIAS}"
            wait_until(lambda: source.hosts()[0].gpu_reason == reason)
            (host,) = source.hosts()
            assert host.gpus == () and host.error is None and remote.errors() == ()
        finally:
            # Its thread waits out the minute now: close must end that wait, or the thread
            # outlives close's bounded join and the thread-leak guard fails this test.
            remote.close()


def raising_listener(store: RunStore) -> threading.Event:
    """A listener that fails every change while the returned event is set (clear it to mend
    it): the reader's loop must show the failure until a refresh succeeds."""
    broken = threading.Event()
    broken.set()

    def listener(changed: frozenset[str]) -> None:
        if broken.is_set():
            raise RuntimeError("listener broke")

    store.subscribe(listener)
    return broken


def test_a_refresh_that_raises_is_the_readers_error_until_one_succeeds(
    sshd: Sshd, tmp_path: Path
) -> None:
    write_scalars(tmp_path / "runs" / "a", halves(range(2)))
    store = RunStore()
    broken = raising_listener(store)
    remote = make_remote_producers(
        [SshSpec(HOST_ALIAS, None, str(tmp_path / "runs"))], store, refresh=INTERVAL,
        ssh_config=sshd.config, gpus=False,
    )  # fmt: skip
    remote.start()
    steps = iter(range(100, 10**6))

    def failing() -> tuple[object, ...]:
        # A new point each look: every refresh has a change for the broken listener, so the
        # error lasts however late this thread looks (a refresh with none would clear it).
        append(tmp_path / "runs" / "a", [(next(steps), 1.0)])
        return remote.errors()

    try:
        wait_until(failing)
        (error,) = remote.errors()
        assert (error.producer, error.message) == (
            f"ssh:{HOST_ALIAS}", f"{HOST_ALIAS}: RuntimeError: listener broke")
        broken.clear()
        append(tmp_path / "runs" / "a", [(10, 1.0)])
        wait_until(lambda: 10 in steps_of(store, f"{HOST_ALIAS}:a") and not remote.errors())
    finally:
        remote.close()
