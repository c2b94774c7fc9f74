"""The comparison model (distcore.table): rows from jobs, filter expressions, sort, group, top N.
Tables of cases, then hypothesis over expressions, values and hostile names."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distcore.errors import DistmonError
from distcore.events.snapshots import RunSnapshot, Series
from distcore.jobs.parts import group_runs, split_run
from distcore.jobs.snapshots import AgentRecord, Job
from distcore.location import RunLocation
from distcore.table import (
    CompareRow,
    build_table,
    compare_row,
    group_rows,
    parse_filter,
    parse_sort,
    select_rows,
    sort_rows,
    top_rows,
)
from distcore.textsafe import terminal_text


def row(name: str, **cells: Any) -> CompareRow:
    return CompareRow(name, "idle", None, cells, {})


def series(tag: str, values: list[float]) -> Series:
    n = len(values)
    steps, walls = tuple(range(n)), (0.0,) * n
    return Series(
        tag, steps, tuple(values), walls, n - 1, values[-1], 0.0, n, min(values), max(values)
    )


def snapshot(name: str, *many: Series, hparams: dict[str, Any] | None = None) -> RunSnapshot:
    path = RunLocation.on_this_machine(f"/logs/{name}")
    return RunSnapshot(name, path, "idle", 1, (), hparams or {},
                       {s.tag: s for s in many}, None)  # fmt: skip


def job(name: str, parts: dict[str, RunSnapshot], agent: AgentRecord | None = None) -> Job:
    return Job(name, None, parts, "idle", agent, (), ())


@pytest.mark.parametrize(
    ("name", "job_name", "part"),
    [
        ("exp/1712345678.123456", "exp", "1712345678.123456"),  # tensorboardX add_hparams
        ("a/b/1712345678.1", "a/b", "1712345678.1"),
        ("1712345678.5", ".", "1712345678.5"),  # add_hparams of a writer at the logdir's root
        ("exp/2024", "exp/2024", ""),  # a run the user named with digits stays a job
        ("exp/1712345678", "exp/1712345678", ""),
        ("exp/v1.2", "exp/v1.2", ""),
        ("exp/train", "exp", "train"),
    ],
)
def test_add_hparams_sub_runs_belong_to_their_parent(name: str, job_name: str, part: str) -> None:
    assert split_run(name) == (job_name, part)


def test_a_job_row_gathers_hparams_from_every_writer_and_its_metrics() -> None:
    agent = AgentRecord(status="finished", last_step=3,
                        hparams={"lr": 0.04, "lr_rule": "linear", "replicas": 4})  # fmt: skip
    parts = group_runs([
        snapshot("j", series("loss", [3.0, 1.0, 2.0])),
        snapshot("j/1712345678.1", series("hparam/acc", [0.9]),
                 hparams={"optimizer": "adam", "bn": True, "none": None, "step": 7}),
        snapshot("j/validation", series("loss", [4.0])),
        snapshot("j/system", series("gpu0/util", [50.0]), hparams={"host": "gpu1"}),
    ])["j"]  # fmt: skip
    got = compare_row(job("j", parts, agent))
    assert dict(got.hparams) == {"lr": 0.04, "lr_rule": "linear", "replicas": 4,
                                 "optimizer": "adam", "bn": "true", "hp.step": 7}  # fmt: skip
    assert dict(got.metrics) == {
        "loss": 2.0, "loss.min": 1.0, "loss.max": 3.0, "hparam/acc": 0.9, "hparam/acc.min": 0.9,
        "hparam/acc.max": 0.9, "validation/loss": 4.0, "validation/loss.min": 4.0,
        "validation/loss.max": 4.0,
    }  # fmt: skip
    assert got.step == 2 and got.get("job") == "j" and got.get("nope") is None
    table = build_table([got])
    assert table.columns[:4] == ("job", "status", "step", "bn")
    assert table.metrics[:3] == ("hparam/acc", "hparam/acc.min", "hparam/acc.max")


def test_a_tag_named_like_an_hparam_keeps_its_last_value_as_tag_last() -> None:
    got = compare_row(job("j", {"": snapshot("j", series("lr", [0.1, 0.2]), hparams={"lr": 1})}))
    assert got.get("lr") == 1 and got.get("lr.last") == 0.2 and got.get("lr.max") == 0.2


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("", []),
        ("  ", []),
        ("lr<0.01", [("lr", "<", "0.01", 0.01)]),
        ("lr<0.01,optimizer=adam", [("lr", "<", "0.01", 0.01), ("optimizer", "=", "adam", None)]),
        (" a >= -1e3 , b != x y ", [("a", ">=", "-1e3", -1000.0), ("b", "!=", "x y", None)]),
        ("a==1", [("a", "==", "1", 1.0)]),
        ("a<=1,b>2", [("a", "<=", "1", 1.0), ("b", ">", "2", 2.0)]),
        ("'a,b'='c=d'", [("a,b", "=", "c=d", None)]),
        ('"x\'y"<"1"', [("x'y", "<", "1", None)]),  # quoted: a string
        ("s=''", [("s", "=", "", None)]),
        ("x=inf", [("x", "=", "inf", math.inf)]),
    ],
)  # fmt: skip
def test_parse_filter(expr: str, expected: list[tuple[str, str, str, float | None]]) -> None:
    got = [(c.column, c.op, c.text, c.number) for c in parse_filter(expr)]
    assert got == expected


@pytest.mark.parametrize(
    ("expr", "named"),
    [
        ("lr", "term 1 'lr' has no operator"),
        ("lr<<0.01", "term 1 'lr<<0.01' is not NAME OP VALUE"),
        ("a=1,b", "term 2 'b' has no operator"),
        ("a=1,", "term 2 is empty"),
        (",a=1", "term 1 is empty"),
        ("<3", "has no column name"),
        ("a>", "has no value"),
        ("a='b'c", "is not NAME OP VALUE"),
        ("a='unclosed", "is not NAME OP VALUE"),
        ("a=>1", "is not NAME OP VALUE"),
    ],
)
def test_a_malformed_filter_names_the_term(expr: str, named: str) -> None:
    with pytest.raises(DistmonError, match="bad filter expression") as caught:
        parse_filter(expr)
    assert named in str(caught.value) and repr(expr) in str(caught.value)


ROWS = [
    row("a", lr=0.1, opt="sgd", loss=0.5),
    row("b", lr=0.01, opt="adam", loss=math.nan),
    row("c", lr=0.001, opt="adam"),
    row("d", lr="auto", loss=0.2),
    row("e", loss=0.9),
]


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("lr<0.05", ["b", "c"]),
        ("lr>=0.01", ["a", "b", "d"]),  # "auto" >= "0.01" as strings
        ("lr!=0.1", ["b", "c", "d"]),
        ("lr>'1'", ["d"]),  # a quoted value is a string: numeric cells do not match it
        ("lr=auto", ["d"]),
        ("lr>a", ["d"]),  # strings compare as strings
        ("opt=adam,lr<0.005", ["c"]),
        ("loss<1", ["a", "d", "e"]),  # NaN compares false
        ("loss!=0.5", ["b", "d", "e"]),
        ("job=c", ["c"]),
        ("status=idle", ["a", "b", "c", "d", "e"]),
        ("missing=1", []),
        ("lr=1e-1", ["a"]),
    ],
)
def test_select_rows(expr: str, names: list[str]) -> None:
    assert [r.name for r in select_rows(ROWS, parse_filter(expr))] == names


@pytest.mark.parametrize(
    ("column", "reverse", "names"),
    [
        ("lr", False, ["c", "b", "a", "d", "e"]),  # numbers, strings, then missing
        ("lr", True, ["d", "a", "b", "c", "e"]),  # missing stays last
        ("loss", False, ["d", "a", "e", "b", "c"]),  # NaN after numbers, before missing
        ("loss", True, ["e", "a", "d", "b", "c"]),
        ("opt", False, ["b", "c", "a", "d", "e"]),  # stable within ties
        ("nope", True, ["a", "b", "c", "d", "e"]),
        ("job", True, ["e", "d", "c", "b", "a"]),
    ],
)
def test_sort_rows(column: str, reverse: bool, names: list[str]) -> None:
    assert [r.name for r in sort_rows(ROWS, column, reverse)] == names


def test_parse_sort_top_and_group() -> None:
    assert parse_sort("-loss") == ("loss", True) and parse_sort("loss") == ("loss", False)
    with pytest.raises(DistmonError):
        parse_sort("-")
    assert [r.name for r in top_rows(ROWS, "loss", 2)] == ["d", "a"]
    assert [r.name for r in top_rows(ROWS, "loss", 9, reverse=True)] == ["e", "a", "d"]
    groups = group_rows(ROWS, "opt")
    assert [(v, [r.name for r in rs]) for v, rs in groups] == [
        ("adam", ["b", "c"]), ("sgd", ["a"]), (None, ["d", "e"])
    ]  # fmt: skip
    mixed = group_rows([row("x", g=1), row("y", g="1"), row("z", g=1.0)], "g")
    assert [(v, [r.name for r in rs]) for v, rs in mixed] == [(1, ["x", "z"]), ("1", ["y"])]


# --- generated inputs ------------------------------------------------------------------------

text = st.text(st.characters(codec="utf-8") | st.sampled_from("\x1b\n\udcff,<>=!'\" "), max_size=12)
values = st.one_of(st.floats(allow_nan=True), st.integers(-(2**70), 2**70), text)
OPS = ["<", "<=", ">", ">=", "=", "!="]


def quoted(s: str) -> str:
    return f"'{s}'" if "'" not in s else f'"{s}"'


@given(st.lists(st.tuples(text, st.sampled_from(OPS), text), min_size=1, max_size=4))
def test_quoted_terms_round_trip(terms: list[tuple[str, str, str]]) -> None:
    terms = [
        t for t in terms if not ("'" in t[0] and '"' in t[0]) and not ("'" in t[2] and '"' in t[2])
    ]
    if not terms:
        return
    expr = ",".join(f"{quoted(n)} {op} {quoted(v)}" for n, op, v in terms)
    got = parse_filter(expr)
    assert [(c.column, c.op, c.text, c.number) for c in got] == [
        (n, op, v, None) for n, op, v in terms
    ]


@given(
    st.text(max_size=40)
    | st.lists(st.sampled_from([*OPS, ",", "'", '"', "a", "1", " ", "x.min"])).map("".join)
)
def test_any_expression_parses_or_is_one_clear_error(expr: str) -> None:
    try:
        parse_filter(expr)
    except DistmonError as err:
        message = str(err)
        assert message.startswith("bad filter expression") and "\n" not in terminal_text(message)


@given(
    st.lists(st.dictionaries(text, values, max_size=4), min_size=1, max_size=6),
    text,
    st.sampled_from(OPS),
    values,
    st.booleans(),
)
def test_hostile_names_and_values_never_break_filter_sort_group(
    cells: list[dict[str, Any]], column: str, op: str, value: Any, reverse: bool
) -> None:
    rows = [CompareRow(f"job{i}\x1b", "live", i, c, {}) for i, c in enumerate(cells)]
    expr = (
        f"{quoted(column)}{op}{value!r}"
        if not isinstance(value, str)
        else f"{quoted(column)}{op}{quoted(value)}"
    )
    if ("'" in column and '"' in column) or (
        isinstance(value, str) and "'" in value and '"' in value
    ):
        return
    try:
        conditions = parse_filter(expr)
    except DistmonError:
        return  # e.g. repr(-inf) reads back fine, but a name may hold an operator unquoted
    kept = select_rows(rows, conditions)
    assert all(r in rows for r in kept)
    ranked = sort_rows(rows, column, reverse)
    assert sorted(r.name for r in ranked) == sorted(r.name for r in rows)
    present = [r.get(column) for r in ranked if r.get(column) is not None]
    assert all(v is not None for v in present)
    assert sum(len(g) for _, g in group_rows(rows, column)) == len(rows)
    assert len(top_rows(rows, column, 3, reverse)) <= 3
    build_table(rows)
