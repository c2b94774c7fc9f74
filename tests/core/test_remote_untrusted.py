"""Untrusted remote logdirs through the whole SSH path (real sshd, find, sh, tail): generated
directory names (spaces, newlines, quotes, `$(...)`, undecodable bytes, a leading dash) and
generated file contents (valid records, damaged ones, garbage) read exactly as the local reader
reads the same files, and nothing in a name is ever run by the remote shell."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcore.events import load_once
from distcore.events.store import RunStore
from distcore.remote import make_remote_producers
from distcore.remote.spec import SshSpec
from tests.kit.sshd import HOST_ALIAS, Sshd, sshd_available, started_sshd
from tests.kit.writers import record, scalar_event

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sshd_available(), reason="no OpenSSH server (.ci/run installs it)"),
]

NAME_BYTES = st.binary(min_size=1, max_size=12).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
)
NASTY = st.sampled_from(
    [b"-rf", b"a b", b"x\ny", b"$(touch PWNED)", b"`touch PWNED`", b"'\"", b"\xff\xfe"]
)
CONTENT = st.lists(
    st.one_of(
        st.builds(
            lambda s, v: record(scalar_event("loss", s, v)),
            st.integers(0, 1000),
            st.floats(width=32),
        ),
        st.builds(
            lambda s: bytes(record(scalar_event("acc", s, 1.0))[:-1]) + b"\x00", st.integers(0, 9)
        ),
        st.binary(max_size=40),
    ),
    max_size=12,
).map(b"".join)


@pytest.fixture(scope="module")
def server() -> Iterator[Sshd]:
    root = Path(tempfile.mkdtemp(prefix="distmon-sshd-"))
    with started_sshd(root) as server:
        yield server
    shutil.rmtree(root, ignore_errors=True)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.one_of(NAME_BYTES, NASTY), content=CONTENT)
def test_generated_names_and_contents_read_like_the_local_reader(
    server: Sshd, name: bytes, content: bytes
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "logs"
        run_path = Path(os.fsdecode(os.fsencode(root) + b"/" + name))
        run_path.mkdir(parents=True)
        (run_path / "events.out.tfevents.1.h").write_bytes(content)
        store = RunStore()
        remote = make_remote_producers(
            [SshSpec(HOST_ALIAS, None, str(root))], store, ssh_config=server.config, gpus=False
        )
        try:
            remote.scan_once()
            assert remote.errors() == ()
        finally:
            remote.close()
        local = {r.name: r for r in load_once([root])}
        remote_runs = {r.name.removeprefix(f"{HOST_ALIAS}:"): r for r in store.snapshot()}
        assert set(remote_runs) == set(local)
        for key, run_snap in local.items():
            got = remote_runs[key]
            # Values by repr (exact for floats): NaN equals NaN, as it must between two readers.
            def points(run: Any) -> dict[str, tuple[tuple[int, ...], tuple[str, ...]]]:
                scalars = run.scalars.items()
                return {t: (tuple(s.steps), tuple(map(repr, s.values))) for t, s in scalars}

            assert points(got) == points(run_snap)
            assert got.problems == run_snap.problems
        assert not (Path(tmp) / "PWNED").exists() and not Path("PWNED").exists()
        assert not (Path.home() / "PWNED").exists()
