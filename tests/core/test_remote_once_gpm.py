"""`distmon --once` over a `host:PATH` source samples the host's GPUs and waits for its
`nvidia-smi dmon --gpm-metrics` to answer: the GPM figures, or why there are none, in the JSON
document and the readable report. A real CLI process, a real OpenSSH server on 127.0.0.1, and
the stand-in `nvidia-smi` of tests/core/test_remote_ssh.py (its `dmon-mode` file picks the host)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from distcore.remote.dmon import NO_GPM
from tests.core.test_remote_cli import distmon
from tests.kit.sshd import HOST_ALIAS, Sshd

pytestmark = pytest.mark.slow

FIGURES = [
    {"sm_activity": 34.0, "sm_occupancy": 22.0, "tensor_activity": 9.0, "dram_bandwidth": 57.0},
    {"sm_activity": 61.0, "sm_occupancy": 40.0, "tensor_activity": 48.0, "dram_bandwidth": 12.0},
]
NONE = [dict.fromkeys(FIGURES[0])] * 2
OLD_DRIVER = (f"nvidia-smi dmon on {HOST_ALIAS} gives no GPM (ERROR: Option --gpm-metrics is not"
              " recognized. Please run 'nvidia-smi -h' for help.)")  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "figures", "reason"),
    [("hopper", FIGURES, None), ("ampere", NONE, f"{NO_GPM} on {HOST_ALIAS}"),
     ("old-driver", NONE, OLD_DRIVER)],
    ids=["hopper", "ampere", "old-driver"],
)  # fmt: skip
def test_once_shows_what_dmon_gives(
    sshd: Sshd, tmp_path: Path, mode: str, figures: list[dict[str, float | None]],
    reason: str | None,
) -> None:  # fmt: skip
    (tmp_path / "remote-bin" / "dmon-mode").write_text(mode)
    (tmp_path / "logs").mkdir()
    args = ("--once", "--ssh-config", str(sshd.config), f"{HOST_ALIAS}:{tmp_path}/logs")
    began = time.monotonic()
    result = distmon(*args, "--json")
    took = time.monotonic() - began
    assert result.returncode == 0, result.stderr
    host = next(h for h in json.loads(result.stdout)["hosts"] if h["source"] == "ssh")
    assert [g["utilization_gpu"] for g in host["gpus"]] == [87.0, None]  # the query's
    assert [{k: g[k] for k in FIGURES[0]} for g in host["gpus"]] == figures, took
    assert host["gpm_reason"] == reason

    text = distmon(*args)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    at = lines.index(next(line for line in lines if line.startswith(HOST_ALIAS)))
    gpu0, gpu1 = lines[at + 1 : at + 3]
    assert gpu0.startswith("  GPU 0  NVIDIA") and gpu1.startswith("  GPU 1  NVIDIA")
    if reason is None:
        assert "util 87%  sm 34%  occupancy 22%  tensor 9%  dram 57%  mem" in gpu0
        assert "util n/a  sm 61%  occupancy 40%  tensor 48%  dram 12%  mem" in gpu1
        assert "note:" not in text.stdout.split(HOST_ALIAS, 1)[1]
    else:
        assert " sm " not in gpu0 + gpu1
        assert lines[at + 3] == f"  note: {reason}" and text.stdout.count(reason) == 1
