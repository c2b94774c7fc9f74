"""The whole path on generated hostile logdirs (hypothesis): arbitrary bytes as event files, and
well-framed records (correct CRCs) with any field values — names as any bytes (control and
escape sequences, invalid UTF-8, 10,000 characters), numbers at the extremes, any 64-bit step.

`distmon --once --json` (in process through `collect`, and as real subprocesses) and the
dashboard (Textual pilot over the real watcher: every chart mode, log scale, smoothing, overlay,
focus) never raise, always give valid JSON, and never put a control character on the screen.
Interesting cases found this way are kept below as named tests.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcore.jobs.jsonify import to_json
from distmon.app import DistmonApp
from distmon.once import collect, run_once
from distmon.options import Options
from tests.kit.wait import until
from tests.tui.conftest import fresh
from tests.untrusted import (
    EVENT_FILE,
    HOSTILE_NAMES,
    Point,
    control_characters,
    dir_name,
    hparams_event,
    logdirs,
    names,
    record,
    write_logdir,
    write_run,
)

Runs = Sequence[tuple[bytes, list[Point], bytes]]
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Keys that reach every chart mode, the log scale, smoothing both ways, overlay, focus, the tag
# picker, help and the filter.
KEYS: list[tuple[str, ...]] = [
    ("x",), ("x",), ("l",), ("x",), ("plus",), ("minus",) * 8, ("l",),
    ("space",), ("j",), ("space",), ("enter",), ("t",), ("down",), ("enter",),
    ("escape",), ("question_mark",), ("escape",), ("slash", "[", "\\"), ("escape",),
]  # fmt: skip


@contextmanager
def fresh_dir() -> Iterator[Path]:
    """A new directory per hypothesis example (tmp_path is one per test)."""
    with tempfile.TemporaryDirectory(prefix="untrusted-") as name:
        yield Path(name)


def raw_files() -> st.SearchStrategy[list[tuple[bytes, bytes]]]:
    return st.lists(st.tuples(names, st.binary(max_size=300)), max_size=3)


def write_raw(root: Path, files: list[tuple[bytes, bytes]]) -> None:
    for name, data in files:
        run = Path(os.fsdecode(bytes(root) + b"/raw-" + dir_name(name)))
        run.mkdir(parents=True, exist_ok=True)
        (run / EVENT_FILE).write_bytes(data)


def once_outputs(root: Path) -> tuple[dict[str, Any], str, str]:
    """The document, the --json text and the text report, in process."""
    options = Options(logdirs=(root,), no_gpu=True, once=True)
    doc = to_json(collect(options))
    as_json, as_text = io.StringIO(), io.StringIO()
    run_once(Options(logdirs=(root,), no_gpu=True, once=True, json=True), as_json)
    run_once(options, as_text)
    return doc, as_json.getvalue(), as_text.getvalue()


def check_once(root: Path, expected_runs: int) -> dict[str, Any]:
    doc, as_json, as_text = once_outputs(root)
    parsed = json.loads(as_json.encode("utf-8"), parse_constant=_refuse)  # strict UTF-8
    assert len(parsed["runs"]) == len(doc["runs"]) == expected_runs
    assert not control_characters(as_text), control_characters(as_text)[:5]
    return parsed


def _refuse(name: str) -> None:
    raise AssertionError(f"JSON must not contain {name}")


def distinct_dirs(runs: Runs) -> int:
    return len({name for name, _, _ in runs})


@SETTINGS
@given(logdirs(), raw_files())
def test_once_on_generated_logdirs(runs: Runs, raw: list[tuple[bytes, bytes]]) -> None:
    with fresh_dir() as root:
        write_logdir(root, runs)
        write_raw(root, raw)
        check_once(root, distinct_dirs(runs) + len({n for n, _ in raw}))


@pytest.mark.slow
@settings(max_examples=4, deadline=None)
@given(logdirs())
def test_once_json_subprocess_on_generated_logdirs(runs: Runs) -> None:
    with fresh_dir() as root:
        write_logdir(root, runs)
        done = subprocess.run(
            [sys.executable, "-m", "distmon", "--once", "--json", "--no-gpu", str(root)],
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
        doc = json.loads(done.stdout.decode("utf-8"), parse_constant=_refuse)
        assert len(doc["runs"]) == distinct_dirs(runs)


# --- the dashboard ---------------------------------------------------------------------------


def dashboard(options: Options) -> DistmonApp:
    """The app as `distmon` builds it: the real watcher, sampler and job index."""
    from distmon.producers import make_producers

    return DistmonApp(options, producers=lambda: make_producers(options))


def screen_lines(app: DistmonApp) -> list[str]:
    """What the terminal would show: the composed strips of the top screen."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def settled(pilot: Any, app: DistmonApp) -> None:
    """The first scan (a worker) is done and the screen shows the index's snapshot of it."""
    await until(pilot, lambda: not any("reading" in line for line in screen_lines(app)),
                "the first scan's end")
    if app.index is not None:
        app.index.refresh()  # what the scan read, now rather than at the index's next tick
    await fresh(pilot)


async def _drive(root: Path, size: tuple[int, int]) -> list[str]:
    """Open the dashboard on `root` with the real producers, press every key, and return the
    control characters seen on any screen."""
    options = Options(logdirs=(root,), no_gpu=True, refresh=0.2, poll=True)
    app = dashboard(options)
    seen: list[str] = []
    async with app.run_test(size=size) as pilot:
        await settled(pilot, app)
        for keys in KEYS:
            await pilot.press(*keys)
            await pilot.pause()
            seen += [c for line in screen_lines(app) for c in control_characters(line)]
    return seen


def check_dashboard(root: Path, size: tuple[int, int] = (100, 30)) -> None:
    seen = asyncio.run(_drive(root, size))
    assert not seen, seen[:10]


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(logdirs(), raw_files(), st.sampled_from([(80, 24), (160, 48), (40, 12)]))
def test_dashboard_on_generated_logdirs(
    runs: Runs, raw: list[tuple[bytes, bytes]], size: tuple[int, int]
) -> None:
    with fresh_dir() as root:
        write_logdir(root, runs)
        write_raw(root, raw)
        check_dashboard(root, size)


# --- cases kept as named tests -----------------------------------------------------------------

NAN, INF = math.nan, math.inf


def hostile_runs() -> Runs:
    """Every hostile name as a run and as its tag, with extreme steps, values and wall times."""
    out = []
    for i, name in enumerate(HOSTILE_NAMES):
        points = [
            Point(name, 0, 1.0, NAN),
            Point(name, 2**63 - 1, NAN, 1e300, "double"),
            Point(name, -(2**63), 1e300, INF, "float"),
            Point(name, 2**64 - 1, -INF, -1e300),
            Point(b"loss", 7, 0.5, 1.0),
        ]
        out.append((dir_name(name) + b"%d" % i, points, b""))
    return out


@pytest.mark.parametrize(
    ("case", "runs"),
    [
        ("hostile names and extreme numbers", hostile_runs()),
        ("one point", [(b"one", [Point(b"loss", 3, 1.0, 1.0)], b"")]),
        ("all at one step", [(b"same", [Point(b"loss", 5, float(v), 1.0) for v in range(4)], b"")]),
        ("negative steps", [(b"neg", [Point(b"loss", -s, 1.0, 1.0 * s) for s in range(5)], b"")]),
        ("NaN wall times", [(b"nanwall", [Point(b"loss", s, 1.0, NAN) for s in range(5)], b"")]),
        ("only NaN values", [(b"nanval", [Point(b"loss", s, NAN, 1.0) for s in range(3)], b"")]),
        ("lying length", [(b"lie", [Point(b"loss", 1, 1.0, 1.0)], b"\xff" * 8 + b"\x00" * 4)]),
        ("empty file", [(b"empty", [], b"")]),
        pytest.param(
            "names differing in undecodable bytes",
            [
                (b"\xff", [Point(b"t\xff", 1, 1.0, 1.0), Point(b"t\xfe", 1, 2.0, 1.0)], b""),
                (b"\xfe", [Point(b"t", 1, 3.0, 1.0)], b""),
            ],
        ),
        ("markup in names", [(b"[bold]x[/] [/]", [Point(b"[red]tag[/", 1, 1.0, 1.0)], b"")]),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_named_cases_through_once_and_the_dashboard(case: str, runs: Runs, tmp_path: Path) -> None:
    write_logdir(tmp_path, runs)
    check_once(tmp_path, distinct_dirs(runs))
    check_dashboard(tmp_path)


def test_a_ten_thousand_character_tag_is_elided_on_screen(tmp_path: Path) -> None:
    write_run(tmp_path / "run", [Point(b"\x1b" * 10_000, s, 1.0 / (s + 1), s) for s in range(5)])
    lines = asyncio.run(_screen_after(tmp_path, ("t", "down", "enter")))
    assert all(len(line) <= 100 for line in lines)
    assert any("\\x1b\\x1b" in line for line in lines), lines


def test_a_typed_filter_is_never_read_as_markup(tmp_path: Path) -> None:
    """Found here: '[/' in the filter closed a markup tag that did not exist, and the status
    line's MarkupError killed the dashboard."""
    write_run(tmp_path / "run", [Point(b"loss", 1, 1.0, 1.0)])
    keys = ("space", "slash", "[", "/", "[", "b", "]")
    lines = asyncio.run(_screen_after(tmp_path, keys, size=(240, 30)))
    assert any("filter /[/[b]/" in line for line in lines), lines


def test_hostile_hparams(tmp_path: Path) -> None:
    """hparam names and values with escape sequences, 10,000 characters, NaN and infinities;
    a second record whose names are not UTF-8 at all (kept, their bytes written as \\xNN)."""
    hostile: dict[str, str | float | bool] = {
        "\x1b]0;pwned\x07": "\x1b[2J",
        "lr\nfake line": math.nan,
        "long": "y" * 10_000,
        "inf": math.inf,
        "flag": True,
    }
    bad = hparams_event({"AAAA": 1.0}).replace(b"AAAA", b"\xff\xfe\x1b\x07")
    run = tmp_path / "hp"
    run.mkdir()
    (run / EVENT_FILE).write_bytes(record(hparams_event(hostile)) + record(bad))
    _, as_json, as_text = once_outputs(tmp_path)
    parsed = json.loads(as_json.encode("utf-8"), parse_constant=_refuse)
    assert parsed["runs"][0]["hparams"]["lr\nfake line"] == "nan"
    assert parsed["runs"][0]["hparams"]["inf"] == "inf"
    assert parsed["runs"][0]["problems"] == []
    assert parsed["runs"][0]["hparams"]["\\xff\\xfe\x1b\x07"] == 1.0
    assert not control_characters(as_text)
    assert "hparam \\x1b]0;pwned\\x07 = \\x1b[2J" in as_text
    assert "hparam lr\\nfake line = nan" in as_text
    assert "hparam \\xff\\xfe\\x1b\\x07 = 1" in as_text
    assert max(len(line) for line in as_text.splitlines()) < 400
    check_dashboard(tmp_path)


async def _screen_after(
    root: Path, keys: tuple[str, ...], size: tuple[int, int] = (100, 30)
) -> list[str]:
    options = Options(logdirs=(root,), no_gpu=True, refresh=0.2, poll=True)
    app = dashboard(options)
    async with app.run_test(size=size) as pilot:
        await settled(pilot, app)
        await pilot.press(*keys)
        await pilot.pause()
        return screen_lines(app)
