"""Sorting, filtering, grouping and the top N of comparison rows: pure functions.

A filter is a comma-separated conjunction of `NAME OP VALUE`, OP one of `< <= > >= = !=` (`==`
is `=`): `lr<0.01,optimizer=adam`. A numeric cell compares as a number with a VALUE that reads
as one (an unquoted `0.01`, `1e-3`, `inf`) and matches no other; a string cell compares as a
string with VALUE's text. A job without the column does not match. NAME and VALUE may be
quoted ('...' or "...") to hold commas, spaces, the other quote or operator characters
(`"a,b"!=x`); a quoted VALUE is always a string.

Sorting puts numbers before strings, NaN after both and missing cells last, also in reverse.
Hand-written rather than a query library: the grammar is six operators, and its errors must
name the term that is wrong.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from distcore.errors import DistmonError
from distcore.table.rows import CompareRow, Value
from distcore.textsafe import terminal_text

OPERATORS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "<=": operator.le, ">=": operator.ge, "!=": operator.ne, "==": operator.eq,
    "<": operator.lt, ">": operator.gt, "=": operator.eq,
}  # fmt: skip
_QUOTED = r"\"[^\"]*\"|'[^']*'"
_TERM = re.compile(
    rf"\s*(?P<name>{_QUOTED}|[^<>=!,\"']*?)\s*(?P<op><=|>=|!=|==|<|>|=)"
    rf"\s*(?P<value>{_QUOTED}|[^<>=,\"']*?)\s*(?P<end>,|\Z)"
)
HELP: Final = "use NAME OP VALUE[,NAME OP VALUE...], OP one of < <= > >= = !="


@dataclass(frozen=True)
class Condition:
    column: str
    op: str
    text: str
    number: float | None  # the value as a number, where it reads as one

    def matches(self, row: CompareRow) -> bool:
        cell = row.get(self.column)
        compare = OPERATORS[self.op]
        if isinstance(cell, str):
            return bool(compare(cell, self.text))
        if cell is None or self.number is None:
            return False
        return bool(compare(float(cell), self.number))


def _unquote(text: str) -> tuple[str, bool]:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1], True
    return text, False


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _malformed(expr: str, index: int, term: str, why: str) -> DistmonError:
    where = f"term {index} {term!r}" if term else f"term {index}"
    return DistmonError(f"bad filter expression {expr!r}: {where} {why} ({HELP})")


def _why(term: str) -> str:
    if not term:
        return "is empty"
    if not re.search(r"[<>=]", term):
        return "has no operator"
    return "is not NAME OP VALUE"


def parse_filter(expr: str) -> tuple[Condition, ...]:
    """The conditions of `expr` (none for an empty one); a DistmonError naming the term that
    is malformed otherwise."""
    if not expr.strip():
        return ()
    conditions: list[Condition] = []
    pos = 0
    while pos <= len(expr):
        index = len(conditions) + 1
        match = _TERM.match(expr, pos)
        if match is None or (match.end() == pos and pos == len(expr)):
            term = expr[pos:].split(",", 1)[0].strip()
            raise _malformed(expr, index, term, _why(term))
        name, quoted_name = _unquote(match["name"])
        value, quoted_value = _unquote(match["value"])
        term = match.group(0).strip().removesuffix(",").strip()
        if not name and not quoted_name:
            raise _malformed(expr, index, term, "has no column name")
        if not value and not quoted_value:
            raise _malformed(expr, index, term, "has no value")
        number = None if quoted_value else _number(value)
        conditions.append(Condition(name, match["op"], value, number))
        pos = match.end()
        if match["end"] != ",":
            break
    return tuple(conditions)


def resolve_columns(
    conditions: Sequence[Condition], columns: Sequence[str], aliases: Mapping[str, str]
) -> tuple[Condition, ...]:
    """`conditions` with each name made a column of the table: a column's own name, else an
    alias (a header the user reads, like `wait`); a DistmonError naming the columns there are
    otherwise, since a filter on a column nobody has would silently match no job."""
    known = set(columns)
    out = []
    for condition in conditions:
        name = condition.column
        if name not in known and aliases.get(name) in known:
            condition = replace(condition, column=aliases[name])
        elif name not in known:
            raise DistmonError(f"no column {terminal_text(name, 80)!r} ({known_columns(columns)})")
        out.append(condition)
    return tuple(out)


def known_columns(columns: Sequence[str], most: int = 20) -> str:
    """The columns there are, each escaped (a name may hold a newline: the error is one line)."""
    shown = [terminal_text(c, 40) for c in columns[:most]]
    more = len(columns) - most
    return "columns: " + ", ".join(shown) + (f", ... and {more} more" if more > 0 else "")


def select_rows(rows: Iterable[CompareRow], conditions: Sequence[Condition]) -> list[CompareRow]:
    return [row for row in rows if all(c.matches(row) for c in conditions)]


def parse_sort(spec: str) -> tuple[str, bool]:
    """`COLUMN` ascending, `-COLUMN` descending."""
    column, reverse = (spec[1:], True) if spec.startswith("-") else (spec, False)
    if not column:
        raise DistmonError(f"bad sort column {spec!r}: name a column, '-' before it to reverse")
    return column, reverse


def _present_key(value: Value) -> tuple[int, float | str]:
    return (1, value) if isinstance(value, str) else (0, float(value))


def _is_nan(value: Value | None) -> bool:
    return isinstance(value, float) and math.isnan(value)


def sort_rows(rows: Iterable[CompareRow], column: str, reverse: bool = False) -> list[CompareRow]:
    """Stable: numbers as numbers, then strings; NaN and then missing cells last either way."""
    present: list[tuple[tuple[int, float | str], CompareRow]] = []
    nans: list[CompareRow] = []
    missing: list[CompareRow] = []
    for row in rows:
        value = row.get(column)
        if value is None:
            missing.append(row)
        elif _is_nan(value):
            nans.append(row)
        else:
            present.append((_present_key(value), row))
    present.sort(key=lambda pair: pair[0], reverse=reverse)
    return [row for _, row in present] + nans + missing


def top_rows(
    rows: Iterable[CompareRow], column: str, n: int, reverse: bool = False
) -> list[CompareRow]:
    """The first `n` by `column` that have a (non-NaN) value in it."""
    ranked = sort_rows(rows, column, reverse)
    return [row for row in ranked if not (row.get(column) is None or _is_nan(row.get(column)))][:n]


def group_rows(
    rows: Iterable[CompareRow], column: str
) -> list[tuple[Value | None, list[CompareRow]]]:
    """Rows by their value of `column` (their order kept within a group); groups in that
    column's sort order, the rows without it last (value None)."""
    groups: dict[Any, list[CompareRow]] = {}
    firsts: list[CompareRow] = []
    for row in rows:
        value = row.get(column)
        key = "nan" if _is_nan(value) else (type(value) is str, value)
        if key not in groups:
            groups[key] = []
            firsts.append(row)
        groups[key].append(row)
    out = []
    for first in sort_rows(firsts, column):
        value = first.get(column)
        key = "nan" if _is_nan(value) else (type(value) is str, value)
        out.append((value, groups[key]))
    return out
