"""A remote host over a cap (remote/bounds.py), through real sshds: one whose nvidia-smi prints
200 MB without a newline, one that reports 100,000 GPUs. Each is refused, holds no more memory
than a sample's caps, has its commands stopped, and the normal host beside it still samples."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distcore.events.store import RunStore
from distcore.jobs.snapshots import Host
from distcore.remote import RemoteProducers, make_remote_producers
from distcore.remote.bounds import MAX_GPUS, MAX_LINE_BYTES, Allowance, BoundedLines, Refused
from distcore.remote.spec import SshSpec
from distcore.remote.ssh import MAX_ANSWER_BYTES
from tests.core.test_jobs_incremental import Clock
from tests.kit.sshd import HOST_ALIAS, NO_SSHD, STAND_IN, sshd_available, started_sshd
from tests.kit.wait import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sshd_available(), reason=NO_SSHD)]

FLOOD_BYTES = 200_000_000
# The hostile host's nvidia-smi: the query prints what `mode` says (dmon prints nothing).
HOSTILE = rf"""#!/bin/sh
[ "$1" = dmon ] && exit 0
case $(cat "$(dirname "$0")/mode") in
  long-line) head -c {FLOOD_BYTES} /dev/zero | tr '\0' x ;;
  many-gpus) awk 'BEGIN {{ rest = "87, 41, 61234, 81559, 64, 512.33, 700.00, 1980, 30"
    for (i = 0; i < 100000; i++) printf "%d, NVIDIA H100, GPU-%d, %s\n", i, i, rest }}' ;;
esac
"""
REFUSED = {
    "long-line": f"refused: a line longer than {MAX_LINE_BYTES >> 10} KiB",
    "many-gpus": f"refused: more than {MAX_GPUS} GPUs on one host",
}
RSS_BOUND = 200 << 20


@pytest.fixture(params=sorted(REFUSED))
def two_hosts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(the hostile host's mode, an ssh config naming `hostile` and `normal`)."""
    mode: str = request.param
    with (started_sshd(tmp_path / "hostile", HOSTILE, {"mode": mode}) as hostile,
          started_sshd(tmp_path / "normal", STAND_IN, {"mode": ""}) as normal):
        config = tmp_path / "config"
        config.write_text("".join(
            s.config.read_text().replace(f"Host {HOST_ALIAS}\n", f"Host {name}\n", 1)
            for name, s in (("hostile", hostile), ("normal", normal))))
        yield mode, config


class PeakRss:
    """This process's highest resident size while it runs (a sampling thread)."""

    def __init__(self) -> None:
        self._me = psutil.Process()
        self.start = self.peak = self._me.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="test-peak-rss")

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self._me.memory_info().rss)


def _producers(config: Path, tmp_path: Path) -> RemoteProducers:
    specs = [SshSpec(h, None, str(tmp_path)) for h in ("hostile", "normal")]
    return make_remote_producers(specs, RunStore(), refresh=0.2, ssh_config=config)


def _hosts(remote: RemoteProducers) -> dict[str, Host]:
    return {h.name: h for h in remote.hosts()}


def _no_flood_left() -> bool:
    return not any(f"head -c {FLOOD_BYTES}" in " ".join(p.info["cmdline"] or ())
                   for p in psutil.process_iter(["cmdline"]))


def test_a_host_over_a_cap_is_refused_while_its_neighbour_samples(
    two_hosts: tuple[str, Path], tmp_path: Path
) -> None:
    mode, config = two_hosts
    remote = _producers(config, tmp_path)
    with PeakRss() as rss:
        remote.start()
        try:
            wait_until(lambda: _hosts(remote)["hostile"].gpu_reason == REFUSED[mode], timeout=120)
            wait_until(lambda: len(_hosts(remote)["normal"].gpus) == 2)
            sampled = _hosts(remote)["normal"].sampled_at
            wait_until(lambda: _hosts(remote)["normal"].sampled_at != sampled)  # it goes on
            hostile = _hosts(remote)["hostile"]
            assert hostile.gpus == () and hostile.sampled_at is None and hostile.refused
            assert not _hosts(remote)["normal"].refused
            # It costs nothing more: its sampling threads ended, its remote command too.
            samplers = ("distmon-ssh-gpus-hostile", "distmon-ssh-gpm-hostile")
            wait_until(lambda: not any(t.name in samplers for t in threading.enumerate()))
            wait_until(_no_flood_left)
            assert _hosts(remote)["hostile"].gpu_reason == REFUSED[mode]
        finally:
            remote.close()
    assert rss.peak - rss.start < RSS_BOUND


def test_a_logdir_listing_over_its_cap_is_refused(tmp_path: Path) -> None:
    """A host whose `find` prints 200 MB: the answer is cut at its cap, the host is refused
    (its session dropped, the command ended) and distmon holds no more than the cap."""
    root = tmp_path / "flood"
    flood = f"#!/bin/sh\nhead -c {FLOOD_BYTES} /dev/zero | tr '\\0' x\n"
    with started_sshd(root, flood, {"mode": ""}) as server:
        (root / "remote-bin" / "nvidia-smi").rename(root / "remote-bin" / "find")
        remote = make_remote_producers([SshSpec(HOST_ALIAS, None, str(tmp_path))], RunStore(),
                                       ssh_config=server.config, gpus=False)
        try:
            with PeakRss() as rss:
                remote.scan_once()
            (host,) = remote.hosts()
            assert host.error is not None
            assert host.error.endswith(f"(refused: an answer over {MAX_ANSWER_BYTES >> 20} MiB)")
            assert rss.peak - rss.start < RSS_BOUND
            wait_until(_no_flood_left)
        finally:
            remote.close()


def test_once_refuses_the_host_over_a_cap(two_hosts: tuple[str, Path], tmp_path: Path) -> None:
    mode, config = two_hosts
    remote = _producers(config, tmp_path)
    try:
        with PeakRss() as rss:
            for source in remote.host_sources:
                source.sample_once()
        hosts = _hosts(remote)
        assert (hosts["hostile"].gpu_reason, hosts["hostile"].gpus) == (REFUSED[mode], ())
        assert len(hosts["normal"].gpus) == 2 and hosts["normal"].gpu_reason is None
        assert rss.peak - rss.start < RSS_BOUND
        wait_until(_no_flood_left)
    finally:
        remote.close()


@pytest.mark.parametrize(
    ("interval", "sends", "refused"),
    [
        (None, [(256, 1000)], None),  # one sample's worth: taken
        (None, [(256, 1000), (1, 10)], "more than 256 lines per sample"),
        (None, [(1, 1 << 20), (0, 1)], "more than 1024 KiB per sample"),
        # A stream: a sample's worth per interval, several at once after a lag...
        (1.0, [(256, 0)] * 8, None),
        (1.0, [(256, 0)] * 9, "more than 256 lines per sample interval"),
        # ...and earned again as its intervals pass (here one each).
        (1.0, [(256, 0), "tick"] * 20, None),
    ],
)
def test_allowance(interval: float | None, sends: list[tuple[int, int] | str],
                   refused: str | None) -> None:
    clock = Clock(0.0)
    allowance = Allowance(interval, clock)
    try:
        for send in sends:
            if send == "tick":
                clock.now += 1.0
            else:
                assert isinstance(send, tuple)
                allowance.take(*send)
    except Refused as err:
        assert str(err) == refused
    else:
        assert refused is None


def read_through_a_pipe(chunks: list[bytes]) -> list[str]:
    """What BoundedLines makes of `chunks` written into a real pipe, one write each."""
    read_end, write_end = os.pipe()

    def write() -> None:
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(write_end, view):]
        except BrokenPipeError:
            pass  # the reader refused the stream and closed its end
        finally:
            os.close(write_end)

    writer = threading.Thread(target=write, name="test-pipe-writer")
    writer.start()
    try:
        return list(BoundedLines(read_end, Allowance(None)))
    finally:
        os.close(read_end)  # a writer blocked on a refused stream gets EPIPE, and ends
        writer.join()


@given(st.lists(st.binary(max_size=300), max_size=12))
def test_bounded_lines_are_the_lines_of_what_was_sent(chunks: list[bytes]) -> None:
    data = b"".join(chunks)
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the newline ends the last line; none after it
    assert read_through_a_pipe(chunks) == [ln.decode("utf-8", "replace") for ln in lines]


@pytest.mark.parametrize(("chunks", "refused"), [
    ([b"x" * MAX_LINE_BYTES + b"\n"], False),  # at the cap: taken
    ([b"x" * (MAX_LINE_BYTES + 1) + b"\n"], True),
    ([b"x" * 1000] * 70, True),  # over the cap before any newline came: never kept whole
    ([b"0\n" * 257], True),  # more lines than one sample's worth
])
def test_bounded_lines_refuse_over_a_cap(chunks: list[bytes], refused: bool) -> None:
    if refused:
        with pytest.raises(Refused):
            read_through_a_pipe(chunks)
    else:
        assert len(read_through_a_pipe(chunks)) == 1
