"""`distmon --once --table | --csv | --points`: the comparison table and the kept points, headless.

The rows come from distcore.table over the job index's snapshot, as in the dashboard. Text is
escaped (distcore.textsafe) and each column fits its widest cell, up to a bound; CSV has a
header row and the job's name first. Numbers in CSV are written exactly (`repr` of the double:
reading them back gives the same value); strings from the logdir have their control
characters and undecodable bytes escaped as in the text report (`\\n`, `\\x1b`, `\\xff`), so
neither a terminal nor a spreadsheet acts on them, and a string cell that starts like a
formula (`=`, `+`, `-`, `@`) gets a leading `'` (distcore.textsafe.spreadsheet_cell); ordinary
names are unchanged.
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Iterable, Sequence
from typing import TextIO

from distcore.errors import DistmonError
from distcore.events.snapshots import Series
from distcore.jobs.snapshots import JobsSnapshot
from distcore.table import (
    CompareRow,
    ComparisonTable,
    build_table,
    compare_row,
    known_columns,
    parse_filter,
    parse_sort,
    resolve_columns,
    select_rows,
    sort_rows,
)
from distcore.textsafe import shown_names, spreadsheet_cell, terminal_text
from distmon.formats import column_value
from distmon.options import Options
from distmon.render.compare_view import header_aliases

NAME_WIDTH = 60  # characters of a job's name in the text table (elided in the middle)
CELL_WIDTH = 24  # of any other cell
HEADER_WIDTH = 40
POINTS_HEADER = ("run", "tag", "step", "wall_time", "value")


def collect_jobs(options: Options) -> JobsSnapshot:
    """One pass over every source into the job index's snapshot, through the one report path
    (`distmon.once.collect`); no GPUs: the table and the points are the logdirs' own."""
    import dataclasses

    from distmon.report import collect

    return collect(dataclasses.replace(options, no_gpu=True))


def run_table(options: Options, out: TextIO) -> int:
    """--table, --csv or --points: print, exit 0; problems reading go to stderr."""
    snap = collect_jobs(options)
    if options.points:
        render_points_csv(snap, out)
    elif options.csv:
        render_table_csv(table_of(snap, options), out)
    else:
        render_table_text(table_of(snap, options), out)
    for line in (*snap.problems, *(f"{e.producer}: {e.message}" for e in snap.errors)):
        print(f"distmon: {terminal_text(line, 300)}", file=sys.stderr)
    return 0


def table_of(snap: JobsSnapshot, options: Options) -> ComparisonTable:
    """The snapshot's rows, filtered and sorted as the options say."""
    table = build_table(compare_row(job) for job in snap.jobs)
    rows: Sequence[CompareRow] = table.rows
    aliases = header_aliases(table.rows)
    if options.filter:
        conditions = parse_filter(options.filter)
        if table.rows:
            try:
                conditions = resolve_columns(conditions, table.columns, aliases)
            except DistmonError as err:
                raise DistmonError(f"--filter: {err}") from None
        rows = select_rows(rows, conditions)
    if options.sort:
        column, reverse = parse_sort(options.sort)
        if table.rows and column not in table.columns:
            column = aliases.get(column, column)
            if column not in table.columns:
                name = terminal_text(options.sort.lstrip("-"), 80)
                raise DistmonError(f"--sort: no column {name!r} ({known_columns(table.columns)})")
        rows = sort_rows(rows, column, reverse)
    return ComparisonTable(table.hparams, table.metrics, tuple(rows))


def shown_value(value: object, column: str = "") -> str:
    """A cell as text: a share as a share (`column_value`), other numbers in 6 significant
    digits, missing as '–'."""
    if value is None:
        return "–"
    if isinstance(value, int | float) and not isinstance(value, bool):
        shown = column_value(column, float(value))
        if shown is not None:
            return shown
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    return str(value)


def exact_value(value: object) -> str:
    """A cell for CSV: numbers exactly, missing empty."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, int):
        return str(value)
    return spreadsheet_cell(terminal_text(str(value)))


def render_table_text(table: ComparisonTable, out: TextIO) -> None:
    columns = table.columns
    header = [terminal_text(c, HEADER_WIDTH) for c in columns]
    jobs = shown_names((r.name for r in table.rows), NAME_WIDTH)
    body = [
        [jobs[r.name] if c == "job" else terminal_text(shown_value(r.get(c), c), CELL_WIDTH)
         for c in columns]
        for r in table.rows
    ]  # fmt: skip
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(columns))]
    numeric = [
        any(isinstance(r.get(c), int | float) for r in table.rows) and c != "job" for c in columns
    ]

    def line(cells: Sequence[str]) -> str:
        fitted = (
            cell.rjust(width) if right else cell.ljust(width)
            for cell, width, right in zip(cells, widths, numeric, strict=True)
        )
        return "  ".join(fitted).rstrip() + "\n"

    out.write(line(header))
    for cells in body:
        out.write(line(cells))
    if not table.rows:
        out.write("(no jobs)\n")


def render_table_csv(table: ComparisonTable, out: TextIO) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([spreadsheet_cell(terminal_text(c)) for c in table.columns])
    jobs = shown_names(row.name for row in table.rows)
    for row in table.rows:
        writer.writerow(
            [spreadsheet_cell(jobs[row.name]) if c == "job" else exact_value(row.get(c))
             for c in table.columns]
        )  # fmt: skip


def render_points_csv(snap: JobsSnapshot, out: TextIO) -> None:
    """Every kept point of every run and tag: run,tag,step,wall_time,value."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(POINTS_HEADER)
    runs = [run for job in snap.jobs for run in job.parts.values()]
    shown = shown_names(run.name for run in runs)  # names that print alike stay apart
    for run in runs:
        name = spreadsheet_cell(shown[run.name])
        for tag, series in run.scalars.items():
            writer.writerows(_points(name, spreadsheet_cell(terminal_text(tag)), series))


def _points(run: str, tag: str, series: Series) -> Iterable[tuple[str, str, str, str, str]]:
    for step, wall, value in zip(series.steps, series.wall_times, series.values, strict=True):
        yield (run, tag, str(int(step)), exact_value(float(wall)), exact_value(float(value)))
