"""The comparison table: one row per job, its hparams and metrics as columns, for sweeps.

Pure functions over the job index's snapshot: `rows` builds the rows and the column list,
`query` sorts, filters, groups and picks the top N. No Textual, no TensorFlow, no I/O; the
front ends (the dashboard's runs table, `distmon --once --table/--csv`) only render.
"""

from distcore.table.query import (
    Condition,
    group_rows,
    known_columns,
    parse_filter,
    parse_sort,
    resolve_columns,
    select_rows,
    sort_rows,
    top_rows,
)
from distcore.table.rows import FIXED_COLUMNS, CompareRow, ComparisonTable, build_table, compare_row

__all__ = [
    "FIXED_COLUMNS",
    "CompareRow",
    "ComparisonTable",
    "Condition",
    "build_table",
    "compare_row",
    "group_rows",
    "known_columns",
    "parse_filter",
    "parse_sort",
    "resolve_columns",
    "select_rows",
    "sort_rows",
    "top_rows",
]
