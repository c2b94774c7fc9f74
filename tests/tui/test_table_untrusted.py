"""The comparison table over hostile logdirs: names and values with control characters, bidi
overrides, markup, undecodable bytes and 10,000 characters, extreme numbers; and generated
filter and sort arguments. Through the CLI's main() (every generated case) and one real
process: exit 0 or one line and 2, the text escaped, the CSV well-formed."""

from __future__ import annotations

import csv
import io
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distmon.cli import main
from tests.untrusted import HOSTILE_NAMES, Point, dir_name, write_run

HOSTILE_TEXT = [n.decode("utf-8", "surrogateescape") for n in HOSTILE_NAMES]
CONTROL = {chr(c) for c in range(32) if c != 10} | {"\x7f", "\u202e"}


def write_hparams(run_dir: Path, hparams: dict[str, object]) -> None:
    from tensorboardX import SummaryWriter
    from tensorboardX.summary import hparams as hparams_summaries

    _, session_start, _ = hparams_summaries(hparams, {})  # as add_hparams writes it
    with SummaryWriter(str(run_dir)) as w:
        w.file_writer.add_summary(session_start)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    for i, raw in enumerate(HOSTILE_NAMES):
        run = Path(os.fsdecode(bytes(root) + b"/" + dir_name(raw) + b"%d" % i))
        values = [1.0, math.nan, 1e300, -math.inf, 0.5][: i % 5 + 1]
        write_run(run, [Point(raw, s, v, 1000.0 + s, "simple") for s, v in enumerate(values)])
        text = HOSTILE_TEXT[i]
        if "\udc80" <= max(text) <= "\udcff":  # protobuf strings must be UTF-8
            continue
        write_hparams(run / "1712345678.5", {text: text, "lr": 10.0**-i, "flag": i % 2 == 0})
    return root


def cli(*args: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        code = main(["--once", *map(str, args)])
    finally:
        sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


def test_hostile_names_are_escaped_in_the_table_and_csv(hostile: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "distmon", "--once", "--table", "--sort", "-lr", str(hostile)],
        capture_output=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert not CONTROL & set(text) and "\\x1b[31mred" in text
    code, out, _ = cli("--csv", hostile)
    rows = list(csv.reader(io.StringIO(out)))
    assert code == 0 and len(rows) == 1 + len(HOSTILE_NAMES)
    assert all(len(r) == len(rows[0]) for r in rows) and not CONTROL & set(out)


OPS = ["<", "<=", ">", ">=", "=", "!=", "==", ",", "'", '"', " "]
pieces = st.sampled_from([*HOSTILE_TEXT[:9], *OPS, "lr", "flag", "true", "1e-3", "nan", "loss"])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    expr=st.lists(pieces, max_size=8).map("".join), sort=st.lists(pieces, max_size=3).map("".join)
)
def test_generated_filters_and_sorts_exit_0_or_one_line_2(
    hostile: Path, expr: str, sort: str
) -> None:
    code, out, err = cli("--csv", "--filter", expr, "--sort", sort or "lr", hostile)
    if code == 0:
        rows = list(csv.reader(io.StringIO(out)))
        assert rows[0][0] == "job" and len(rows) <= 1 + len(HOSTILE_NAMES)
    else:
        assert code == 2 and not out and err.count("\n") == 1 and not CONTROL & set(err)


def test_formula_cells_reach_a_spreadsheet_as_text(tmp_path: Path) -> None:
    """Run names, tags and hparams that start like a formula are written with a leading `'`
    in --csv and --points (OWASP's CSV injection), through a real process."""
    evil = '=HYPERLINK("http://x","y")'
    run = tmp_path / "-2+3"
    write_run(run, [Point(b"@SUM(A1)", s, 0.5, 1000.0 + s, "simple") for s in range(2)])
    write_hparams(run / "1712345678.5", {"+cmd": evil, "lr": 0.1})
    table = subprocess.run(
        [sys.executable, "-m", "distmon", "--once", "--csv", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert table.returncode == 0, table.stderr
    header, row = list(csv.reader(io.StringIO(table.stdout)))
    cells = dict(zip(header, row, strict=True))
    assert cells["'+cmd"] == "'" + evil and cells["job"].startswith("'-2+3")
    assert cells["lr"] == "0.1"  # numbers are distmon's own: never prefixed
    points = subprocess.run(
        [sys.executable, "-m", "distmon", "--once", "--points", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert points.returncode == 0, points.stderr
    rows = list(csv.reader(io.StringIO(points.stdout)))[1:]
    assert rows and all(r[0].startswith("'-2+3") and r[1] == "'@SUM(A1)" for r in rows)
    assert not any(cell.startswith(("=", "+", "-", "@")) for r in rows for cell in r)


def test_names_that_print_alike_stay_apart_in_every_export(tmp_path: Path) -> None:
    """A run named with the byte 0xFF and one named with the text `\\xff` print alike; the
    table, the CSV and --points keep them two, by the text report's ` #2` rule."""
    byte_run = Path(os.fsdecode(bytes(tmp_path) + b"/x\xff"))
    text_run = tmp_path / "x\\xff"
    for run, value in ((byte_run, 1.0), (text_run, 2.0)):
        write_run(run, [Point(b"loss", s, value, 1000.0 + s, "simple") for s in range(3)])
    code, out, _ = cli("--csv", tmp_path)
    jobs = [row["job"] for row in csv.DictReader(io.StringIO(out))]
    assert code == 0 and len(jobs) == 2 and len(set(jobs)) == 2, jobs
    assert {j.split("/")[-1] for j in jobs} <= {"x\\xff", "x\\xff #2"}
    code, out, _ = cli("--table", tmp_path)
    body = out.splitlines()[1:]
    assert code == 0 and len(body) == 2 and sum("x\\xff #2 " in line for line in body) == 1
    code, out, _ = cli("--points", tmp_path)
    rows = list(csv.DictReader(io.StringIO(out)))
    by_run: dict[str, set[str]] = {}
    for row in rows:
        by_run.setdefault(row["run"], set()).add(row["value"])
    assert code == 0 and len(by_run) == 2 and sorted(map(len, by_run.values())) == [1, 1]


def test_a_filter_on_a_misspelled_column_is_an_error_like_a_sort(tmp_path: Path) -> None:
    write_run(tmp_path / "a", [Point(b"loss", s, 1.0, 1000.0 + s, "simple") for s in range(2)])
    for flag in ("--filter", "--sort"):
        code, out, err = cli("--table", flag, "los>1" if flag == "--filter" else "los", tmp_path)
        assert code == 2 and not out, (flag, out, err)
        assert f"{flag}: no column 'los'" in err and "loss" in err and len(err.splitlines()) == 1
