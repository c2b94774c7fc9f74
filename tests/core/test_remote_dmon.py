"""A remote host's GPM from `nvidia-smi dmon --gpm-metrics 2,3,5,10`: its lines parsed (a table of
lines as dmon prints them), and SshGpuSource's second stream run as real processes: a stand-in
`nvidia-smi` answering both the query and dmon, through a connection that runs commands in a
local shell instead of over ssh (tests/core/test_remote_ssh.py covers the ssh hop)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distcore.remote import nvidia_smi
from distcore.remote.dmon import (
    NO_GPM,
    OTHER_LIMIT,
    DmonLines,
    dmon_command,
    header_columns,
    parse_row,
)
from distcore.remote.nvidia_smi import GPM_RETRY, ONCE_GPM_TICKS, SshGpuSource
from tests.kit.wait import wait_until

# dmon's default columns, then the four GPM metrics asked (their names vary by driver: the parser
# takes them by position), a units line, then one row per GPU; "-" where a figure is missing.
HEADER = ("# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk"
          " smutil  smocc anyten   dram")  # fmt: skip
UNITS = ("# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz"
         "      %      %      %      %")  # fmt: skip
HOPPER = ("    0    512     64     71     87     41      0      0      0      0   2619   1980"
          "     34     22      9     57")  # fmt: skip
AMPERE = ("    1     71     35      -      3      1      0      0      0      0   1593    345"
          "      -      -      -      -")  # fmt: skip
COLUMNS = 16


@pytest.mark.parametrize(
    ("line", "columns"),
    [(HEADER, COLUMNS), ("#gpu smutil", 2), (UNITS, None), (HOPPER, None), ("", None),
     ("# Idx", None), ("Failed to initialize NVML", None)],
)  # fmt: skip
def test_header_columns(line: str, columns: int | None) -> None:
    assert header_columns(line) == columns


FIGURES = {"sm_activity": 34.0, "sm_occupancy": 22.0, "tensor_activity": 9.0,
           "dram_bandwidth": 57.0}  # fmt: skip
NONE = dict.fromkeys(FIGURES)


@pytest.mark.parametrize(
    ("line", "columns", "parsed"),
    [
        (HOPPER, COLUMNS, (0, FIGURES)),
        (AMPERE, COLUMNS, (1, NONE)),  # before Hopper: "-" is unknown, never 0
        (HOPPER + "\n", COLUMNS, (0, FIGURES)),
        (HOPPER.replace(" 57", " 100.0"), COLUMNS, (0, {**FIGURES, "dram_bandwidth": 100.0})),
        (HOPPER.replace(" 57", " 250"), COLUMNS, (0, {**FIGURES, "dram_bandwidth": None})),
        (HOPPER.replace(" 57", " nan"), COLUMNS, (0, {**FIGURES, "dram_bandwidth": None})),
        (HOPPER, None, None),  # before the header: the width is unknown
        (HOPPER, COLUMNS + 1, None),  # another width (a MIG instance's row)
        (HEADER, COLUMNS, None),
        (UNITS, COLUMNS, None),
        ("    0   512", 2, None),  # no room for the GPM columns
        ("Failed to initialize NVML: Driver/library version mismatch", 7, None),
        ("\u00b2" + HOPPER.lstrip().removeprefix("0"), COLUMNS, None),  # a digit to isdigit only
        ("9" * 5000 + HOPPER.lstrip().removeprefix("0"), COLUMNS, None),  # past int()'s digits
    ],
)
def test_parse_row(line: str, columns: int | None, parsed: object) -> None:
    assert parse_row(line, columns) == parsed


def test_dmon_command_asks_the_four_metrics_every_whole_second() -> None:
    assert dmon_command(1.0) == "exec nvidia-smi dmon --gpm-metrics 2,3,5,10 -d 1"
    assert dmon_command(0.2).endswith(" -d 1") and dmon_command(5.4).endswith(" -d 5")
    assert dmon_command(1.0, 2).endswith(" -d 1 -c 2")


REFUSED = "ERROR: Option --gpm-metrics is not recognized. Please run 'nvidia-smi -h' for help."


@pytest.mark.parametrize(
    ("lines", "rows", "other"),
    [
        ([HEADER, UNITS, HOPPER, AMPERE], [0, 1], None),
        ([REFUSED], [], REFUSED),  # nvidia-smi prints its argument errors on stdout
        (["Failed to initialize NVML: Driver/library version mismatch\n"], [],
         "Failed to initialize NVML: Driver/library version mismatch"),
        ([HOPPER, HEADER, HOPPER + "  7"], [], None),  # GPU lines of no known width: no error
        (["", "   \n", "# Idx"], [], None),
        (["x" * (OTHER_LIMIT + 50)], [], "x" * OTHER_LIMIT),
    ],
)  # fmt: skip
def test_dmon_lines_keep_the_error_printed_instead_of_rows(
    lines: list[str], rows: list[int], other: str | None
) -> None:
    dmon = DmonLines()
    assert [row[0] for row in map(dmon.feed, lines) if row is not None] == rows
    assert dmon.other == other


DMON_TEXT = st.one_of(st.sampled_from([HEADER, UNITS, HOPPER, AMPERE, REFUSED]),
                      st.text(st.characters(codec="utf-8"), max_size=200))  # fmt: skip


@given(st.lists(DMON_TEXT, max_size=12))
def test_any_dmon_output_gives_sane_rows_and_a_bounded_error(lines: list[str]) -> None:
    dmon = DmonLines()
    for line in lines:
        row = dmon.feed(line)
        if row is not None:
            index, values = row
            assert 0 <= index < 10**6
            assert all(v is None or 0.0 <= v <= 100.0 for v in values.values())
    assert dmon.other is None or 0 < len(dmon.other) <= OTHER_LIMIT


# --- the stream, as real processes ---------------------------------------------------------------

QUERY_ROWS = (
    "0, NVIDIA H100 80GB HBM3, GPU-a, 97, 41, 61234, 81559, 64, 512.33, 700.00, 1980, [N/A]",
    "1, NVIDIA A100 80GB PCIe, GPU-b, 95, 40, 1000, 81920, 35, 71.02, 300.00, 1410, 30",
)


def stand_in(rows: tuple[str, ...]) -> str:
    """An nvidia-smi that streams the query's two GPUs, and dmon's header and `rows`."""
    dmon = "\n".join(f"  echo '{r}'" for r in rows)
    query = "\n".join(f"  echo '{r}'" for r in QUERY_ROWS)
    return f"""#!/bin/sh
if [ "$1" = dmon ]; then
  echo '{HEADER}'
  echo '{UNITS}'
  while :; do
{dmon}
    sleep 0.2
  done
fi
while :; do
{query}
  sleep 0.2
done
"""


class LocalShell:
    """The SshConnection surface SshGpuSource uses, running each command in a local shell."""

    def __init__(self, bin_dir: Path) -> None:
        self.env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        self.started: list[str] = []

    def popen(self, command: str) -> subprocess.Popen[bytes]:
        self.started.append(command)
        pipe = subprocess.PIPE
        return subprocess.Popen(["sh", "-c", command], stdin=subprocess.DEVNULL, stdout=pipe,
                                stderr=pipe, env=self.env)  # fmt: skip

    def interrupt(self) -> None:
        pass

    def error_line(self) -> str | None:
        return None


Make = Callable[[tuple[str, ...]], tuple[SshGpuSource, LocalShell]]


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Make]:
    made: list[SshGpuSource] = []

    def make(rows: tuple[str, ...]) -> tuple[SshGpuSource, LocalShell]:
        script = tmp_path / "nvidia-smi"
        script.write_text(stand_in(rows))
        script.chmod(0o755)
        shell = LocalShell(tmp_path)
        gpus = SshGpuSource(shell, "gpu7", interval=0.2)  # type: ignore[arg-type]
        made.append(gpus)
        gpus.start()
        return gpus, shell

    yield make
    for gpus in made:
        gpus.close()


def test_a_hosts_gpm_fills_its_gpus_and_a_gpu_without_says_so(source: Make) -> None:
    gpus, _ = source((HOPPER, AMPERE))
    wait_until(lambda: len(gpus.hosts()[0].gpus) == 2 and gpus.hosts()[0].gpus[0].sm_activity)
    (host,) = gpus.hosts()
    hopper, ampere = host.gpus
    assert (hopper.utilization_gpu, hopper.sm_activity, hopper.sm_occupancy) == (97.0, 34.0, 22.0)
    assert (hopper.tensor_activity, hopper.dram_bandwidth) == (9.0, 57.0)
    assert ampere.utilization_gpu == 95.0 and ampere.sm_activity is None
    assert host.gpm_reason == f"{NO_GPM} for GPU 1 on gpu7"


def test_a_host_with_no_gpm_says_so_once_and_stops_asking(source: Make) -> None:
    """Every GPU "-": the dmon stream is stopped (not read for ever to learn nothing), its reason
    stays, and dmon is asked again only after GPM_RETRY."""
    gpus, shell = source((AMPERE, AMPERE.replace("    1 ", "    0 ", 1)))
    wait_until(lambda: gpus.hosts()[0].gpm_reason == f"{NO_GPM} on gpu7")
    (host,) = gpus.hosts()
    assert len(host.gpus) == 2 and all(g.sm_activity is None for g in host.gpus)
    assert host.gpus[0].utilization_gpu == 97.0  # the query stream goes on
    dmons = [c for c in shell.started if " dmon " in c]
    wait_until(lambda: not any(p.poll() is None for p in _dmon_processes(gpus)))
    assert len(dmons) == 1 and GPM_RETRY >= 60
    assert gpus.hosts()[0].gpm_reason == f"{NO_GPM} on gpu7"


def _dmon_processes(gpus: SshGpuSource) -> list[subprocess.Popen[bytes]]:
    proc = gpus._gpm_proc
    return [proc] if proc is not None else []


# --- --once: one query, and dmon read until it answers --------------------------------------------

HOPPER_1 = HOPPER.replace("    0 ", "    1 ", 1)
DASHES = AMPERE.replace("    1 ", "    0 ", 1)
# A first tick without figures, then one with (whichever a driver prints first, --once waits).
LATE_FIGURES = f"""  echo '{HEADER}'; echo '{UNITS}'
  sleep 0.2; echo '{DASHES}'; echo '{AMPERE}'
  sleep 0.2; echo '{HOPPER}'; echo '{HOPPER_1}'"""
HOSTILE_REFUSAL = (r"  printf '\033]0;pwned\007ERROR: Option --gpm-metrics is not recognized.\n'"
                   "; exit 2")
SILENT = f"""  echo '{HEADER}'
  while :; do sleep 0.2; done"""


def once_stand_in(tmp_path: Path, dmon: str, query: str | None = None) -> LocalShell:
    """An nvidia-smi whose query prints the two GPUs once (or runs `query`), and whose dmon
    runs `dmon`."""
    query = query or "\n".join(f"echo '{r}'" for r in QUERY_ROWS)
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!/bin/sh\nif [ \"$1\" = dmon ]; then\n{dmon}\n  exit 0\nfi\n{query}\n")
    script.chmod(0o755)
    return LocalShell(tmp_path)


def test_once_waits_for_a_tick_with_figures(tmp_path: Path) -> None:
    shell = once_stand_in(tmp_path, LATE_FIGURES)
    gpus = SshGpuSource(shell, "gpu7")  # type: ignore[arg-type]
    gpus.sample_once()
    (host,) = gpus.hosts()
    assert [(g.utilization_gpu, g.sm_activity, g.dram_bandwidth) for g in host.gpus] == [
        (97.0, 34.0, 57.0), (95.0, 34.0, 57.0)]  # fmt: skip
    assert host.gpm_reason is None
    assert any(c.endswith(f" -c {ONCE_GPM_TICKS}") for c in shell.started if " dmon " in c)


def test_once_says_why_dmon_refused_escaped(tmp_path: Path) -> None:
    gpus = SshGpuSource(once_stand_in(tmp_path, HOSTILE_REFUSAL), "gpu7")  # type: ignore[arg-type]
    gpus.sample_once()
    (host,) = gpus.hosts()
    assert len(host.gpus) == 2 and host.gpus[0].sm_activity is None
    assert host.gpm_reason == ("nvidia-smi dmon on gpu7 gives no GPM (\\x1b]0;pwned\\x07ERROR:"
                               " Option --gpm-metrics is not recognized.)")  # fmt: skip


def test_once_stops_a_dmon_that_prints_no_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nvidia_smi, "ONCE_GPM_WAIT", 1.0)
    gpus = SshGpuSource(once_stand_in(tmp_path, SILENT), "gpu7")  # type: ignore[arg-type]
    gpus.sample_once()
    (host,) = gpus.hosts()
    assert len(host.gpus) == 2 and host.gpus[0].sm_activity is None
    assert host.gpm_reason == "nvidia-smi dmon on gpu7 printed no row within 1 s"


def test_once_a_query_that_never_answers_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    shell = once_stand_in(tmp_path, HOPPER, query="exec sleep 60")
    gpus = SshGpuSource(shell, "gpu7")  # type: ignore[arg-type]
    started = time.monotonic()
    gpus.sample_once(timeout=1.0)
    (host,) = gpus.hosts()
    assert host.gpus == () and host.gpu_reason == "nvidia-smi on gpu7 gave no answer within 1 s"
    assert time.monotonic() - started < 60  # stopped, not waited for (it sleeps 60 s)
