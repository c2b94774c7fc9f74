"""A remote host's logdir and GPUs in the dashboard, over a real OpenSSH server on 127.0.0.1
with a stand-in `nvidia-smi` on its PATH (there is no GPU here): the remote run in the runs
table, the host and its GPUs in the GPU panel after this machine, as the index hands them, with
the GPM figures of its `nvidia-smi dmon --gpm-metrics` or why there are none."""

from __future__ import annotations

from pathlib import Path

import pytest

from distcore.remote.dmon import NO_GPM
from distcore.remote.spec import SshSpec
from distmon.app import DistmonApp
from distmon.options import Options
from distmon.producers import make_producers
from distmon.widgets.panels import Panel
from distmon.widgets.runs import RunsTable
from tests.kit.sshd import HOST_ALIAS, Sshd
from tests.kit.wait import until
from tests.kit.writers import scalar_records

pytestmark = pytest.mark.slow


async def test_remote_run_and_gpus_on_screen(sshd: Sshd, tmp_path: Path) -> None:
    run = tmp_path / "logs" / "r"
    run.mkdir(parents=True)
    (run / "events.out.tfevents.1.h").write_bytes(scalar_records("loss", [(7, 0.5)]))
    options = Options(
        # GPUs on: --no-gpu would also leave the remote nvidia-smi alone.
        logdirs=(), refresh=0.3, ssh_config=sshd.config,
        remotes=(SshSpec(HOST_ALIAS, None, str(tmp_path / "logs")),),
    )  # fmt: skip
    app = DistmonApp(options, producers=lambda: make_producers(options))
    async with app.run_test(size=(160, 48)) as pilot:
        gpus, table = app.query_one("#gpus", Panel), app.query_one(RunsTable)
        await until(pilot, lambda: "H100" in str(gpus.render())
                    and any(r.key == f"{HOST_ALIAS}:r" for r in table._rows),
                    "the remote host's GPUs and run", every=0.1)
        lines = str(gpus.render()).splitlines()
        assert lines[0].startswith("no GPU"), lines  # this machine first (no NVML here)
        heading = next(i for i, line in enumerate(lines) if line.startswith(HOST_ALIAS))
        assert [line.split()[:2] for line in lines[heading + 1 : heading + 3]] == [
            ["0", "NVIDIA"], ["1", "NVIDIA"]
        ], lines  # fmt: skip
        (row,) = [r for r in table._rows if r.key == f"{HOST_ALIAS}:r"]
        assert row.step == "7"


OLD_DRIVER = (f"nvidia-smi dmon on {HOST_ALIAS} gives no GPM (ERROR: Option --gpm-metrics is not"
              " recognized. Please run 'nvidia-smi -h' for help.)")  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "figures", "reason"),
    [
        ("hopper", ["sm 34%", "sm 61%"], None),
        ("ampere", [], f"{NO_GPM} on {HOST_ALIAS}"),  # dmon's "-" in every GPM column
        ("old-driver", [], OLD_DRIVER),  # dmon refuses --gpm-metrics
    ],
    ids=["hopper", "ampere", "old-driver"],
)
async def test_a_remote_hosts_gpm_figures_or_why_not_on_screen(
    sshd: Sshd, tmp_path: Path, mode: str, figures: list[str], reason: str | None,
) -> None:
    """The remote host's GPU lines carry dmon's GPM figures next to util% as local GPUs do;
    a host without says why, once, under its GPUs."""
    (tmp_path / "remote-bin" / "dmon-mode").write_text(mode)
    (tmp_path / "logs").mkdir()
    options = Options(logdirs=(), refresh=0.3, ssh_config=sshd.config,
                      remotes=(SshSpec(HOST_ALIAS, None, str(tmp_path / "logs")),))  # fmt: skip
    app = DistmonApp(options, producers=lambda: make_producers(options))
    async with app.run_test(size=(160, 48)) as pilot:
        gpus = app.query_one("#gpus", Panel)

        def remote_lines() -> list[str]:
            lines = str(gpus.render()).splitlines()
            at = next((i for i, line in enumerate(lines) if line.startswith(HOST_ALIAS)), None)
            return [] if at is None else lines[at + 1 :]

        def shown() -> bool:
            lines = remote_lines()
            return len(lines) >= 2 and (reason in lines if reason else " sm " in lines[1])

        await until(pilot, shown, "the remote GPUs' lines", every=0.1,
                    detail=lambda: "\n".join(remote_lines()) or str(gpus.render()))
        lines = remote_lines()
        assert [line.split()[:2] for line in lines[:2]] == [["0", "NVIDIA"], ["1", "NVIDIA"]]
        found: list[str | None] = [next((f for f in figures if f in line), None)
                                   for line in lines[:2]]
        assert found == (list(figures) if figures else [None, None])
        assert all(" sm " not in line for line in lines[:2]) or not reason
        assert str(gpus.render()).count(reason or "gives no GPM") == (1 if reason else 0)
