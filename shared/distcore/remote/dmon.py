"""A remote host's GPM figures: `nvidia-smi dmon --gpm-metrics` over ssh, beside the query
stream (nvidia_smi.py), parsed into the GpuDevice fields that local NVML GPM fills.

dmon prints two header lines, the columns' names then their units (`# gpu pwr gtemp ...` and
`# Idx W C ...`), then one line per GPU per tick, whitespace-separated, "-" where a figure is
not available. The GPM metrics requested (NVML's nvmlGpmMetricId_t: 2 SM_UTIL, 3 SM_OCCUPANCY,
5 ANY_TENSOR_UTIL, 10 DRAM_BW_UTIL) are its last columns, in the order asked, after the
default groups; they are taken by that position, so a driver that names them differently
still parses. A line whose width is not the header's is skipped (a MIG instance's row, a
banner). Hopper and newer only: before them every GPM cell is "-", or dmon refuses the flag
(nvidia-smi prints such errors on stdout: `DmonLines.other` keeps the last one). Its output
is read through remote/bounds.py's caps, as the query's is.
"""

from __future__ import annotations

from typing import Final

from distcore.telemetry.gpm import NEEDS, GpmValues

# (NVML GPM metric id, the GpuDevice field), in the order asked and printed.
GPM_IDS: Final = ((2, "sm_activity"), (3, "sm_occupancy"), (5, "tensor_activity"),
                  (10, "dram_bandwidth"))  # fmt: skip
NO_GPM: Final = f"nvidia-smi dmon gives no GPM figures ({NEEDS})"


OTHER_LIMIT: Final = 1000  # characters kept of a line that is no row (it is shown elided)


def dmon_command(interval_s: float, count: int | None = None) -> str:
    """The long-running dmon, a line per GPU every `interval_s` (whole seconds, at least 1);
    with `count`, it exits after that many ticks."""
    ids = ",".join(str(i) for i, _ in GPM_IDS)
    ticks = "" if count is None else f" -c {max(1, int(count))}"
    return f"exec nvidia-smi dmon --gpm-metrics {ids} -d {max(1, round(interval_s))}{ticks}"


def header_columns(line: str) -> int | None:
    """The number of columns named by dmon's first header line (`# gpu ...`); None for any
    other line (its units line, a row)."""
    cells = line.lstrip("#").split()
    if not line.startswith("#") or not cells or cells[0].lower() != "gpu":
        return None
    return len(cells)


def _percent(cell: str) -> float | None:
    try:
        value = float(cell)
    except ValueError:
        return None  # "-": not available on this GPU
    return value if 0.0 <= value <= 100.0 else None


def parse_row(line: str, columns: int | None) -> tuple[int, GpmValues] | None:
    """(GPU index, its GPM figures) of one dmon row of `columns` cells; None for a header, a
    row of another width, or before the header said how wide rows are."""
    cells = line.split()
    if columns is None or len(cells) != columns or columns <= len(GPM_IDS):
        return None
    if not (cells[0].isascii() and cells[0].isdigit() and len(cells[0]) <= 6):
        return None  # "²" is a digit to isdigit but not to int; a huge index is no GPU's
    tail = cells[-len(GPM_IDS):]
    return int(cells[0]), {name: _percent(c) for (_, name), c in zip(GPM_IDS, tail, strict=True)}


def has_figures(values: GpmValues) -> bool:
    return any(v is not None for v in values.values())


class DmonLines:
    """dmon's stdout, one line at a time: `feed` gives each row's (GPU index, figures) once the
    header said how wide rows are; `other` is the last line that was neither header nor any
    GPU's line (an error nvidia-smi printed instead of rows), cut to OTHER_LIMIT."""

    def __init__(self) -> None:
        self.columns: int | None = None
        self.other: str | None = None

    def feed(self, line: str) -> tuple[int, GpmValues] | None:
        self.columns = header_columns(line) or self.columns
        row = parse_row(line, self.columns)
        cells = line.split(maxsplit=1)
        if row is None and cells and not cells[0].startswith("#") and not cells[0].isdigit():
            self.other = line.strip()[:OTHER_LIMIT]
        return row
