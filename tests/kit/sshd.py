"""A real OpenSSH sshd on 127.0.0.1 for the remote-source tests, started from a private temporary
directory (own host key, throwaway user key, own sshd_config, high port), and a client `-F` config
pointing at it. Nothing of the machine's own ssh configuration is read or changed.

`started_sshd` is the one way a test starts one (it skips where no sshd is installed); the `sshd`
fixture is one whose sessions find the stand-in nvidia-smi below on their PATH."""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import psutil
import pytest

from tests.kit.net import free_port, wait_port

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
HOST_ALIAS = "distmon-test"
NO_SSHD = "OpenSSH server not installed (.ci/run adds it: apt-get install openssh-server)"

# What `nvidia-smi --query-gpu=<distmon's fields> --format=csv,noheader,nounits -lms N` prints on
# a two-GPU host where the second GPU is a MIG-enabled one (N/A utilization) without fan; and
# what `nvidia-smi dmon --gpm-metrics 2,3,5,10 -d D [-c C]` prints there: its two header lines,
# then a row per GPU every D seconds (C ticks, or until stopped), GPM figures last. A file
# `dmon-mode` beside the script makes it another host: "ampere" (two A100s: dmon prints "-" in
# every GPM column) or "old-driver" (dmon without --gpm-metrics: refused, on stdout, exit 2).
STAND_IN = r"""#!/bin/sh
mode=$(cat "$(dirname "$0")/dmon-mode" 2>/dev/null)
name="NVIDIA H100 80GB HBM3"; gpm0="    34     22      9     57"; gpm1="    61     40     48     12"
if [ "$mode" = ampere ]; then
  name="NVIDIA A100-SXM4-80GB"; gpm0="     -      -      -      -"; gpm1=$gpm0
fi
if [ "$1" = dmon ]; then
  if [ "$mode" = old-driver ]; then
    echo "ERROR: Option --gpm-metrics is not recognized. Please run 'nvidia-smi -h' for help."
    exit 2
  fi
  d=1; c=0; prev=
  for a in "$@"; do [ "$prev" = -d ] && d=$a; [ "$prev" = -c ] && c=$a; prev=$a; done
  echo "# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk\
 smutil  smocc anyten   dram"
  echo "# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz\
  GPM:%  GPM:%  GPM:%  GPM:%"
  n=0
  while [ "$c" = 0 ] || [ "$n" -lt "$c" ]; do
    sleep "$d"
    echo "    0    512     64     71     87     41      0      0      0      0   2619   1980$gpm0"
    echo "    1     71     35     40      -      0      0      0      0      0   2619    345$gpm1"
    n=$((n + 1))
  done
  exit 0
fi
ms=1000; prev=
for a in "$@"; do [ "$prev" = "-lms" ] && ms=$a; prev=$a; done
while :; do
  echo "0, $name, GPU-5c8b3d1e-0000-4a4b-8c8c-000000000001, 87, 41, 61234, \
81559, 64, 512.33, 700.00, 1980, [N/A]"
  echo "1, $name, GPU-5c8b3d1e-0000-4a4b-8c8c-000000000002, [N/A], [N/A], 13, \
81559, 35, 71.02, 700.00, 345, [Not Supported]"
  case " $* " in *" -lms "*) ;; *) exit 0;; esac
  sleep "$(awk "BEGIN {print $ms / 1000}")"
done
"""


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


@contextlib.contextmanager
def started_sshd(root: Path, nvidia_smi: str | None = None, files: Mapping[str, str] | None = None,
                 home: Path | None = None) -> Iterator[Sshd]:
    """An sshd under `root`, stopped on exit; skips where none is installed. `nvidia_smi`: a
    script the sessions find on their PATH as nvidia-smi, with `files` beside it (none: PATH is
    /usr/bin:/bin there). `home`: see Sshd."""
    if not sshd_available():
        pytest.skip(NO_SSHD)
    remote_bin = None
    if nvidia_smi is not None:
        remote_bin = root / "remote-bin"
        remote_bin.mkdir(parents=True)
        (remote_bin / "nvidia-smi").write_text(nvidia_smi)
        (remote_bin / "nvidia-smi").chmod(0o755)
        for name, text in (files or {}).items():
            (remote_bin / name).write_text(text)
    (root / "sshd").mkdir(parents=True)
    server = Sshd(root / "sshd", remote_bin=remote_bin, home=home)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    """An sshd whose hosts have the stand-in nvidia-smi (two GPUs); skips without an sshd."""
    with started_sshd(tmp_path, nvidia_smi=STAND_IN) as server:
        yield server
