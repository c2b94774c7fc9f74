"""What `distagent` prints, whatever a logdir, a run.json or the terminal is like: outside strings
escaped, valid JSON, no traceback on a closed pipe or a strict encoding. Real CLI, subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distagent.cli import BROKEN_PIPE_EXIT
from distcore import names

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
QUICKSTART = Path(__file__).resolve().parents[2] / "sample_configs" / "quickstart.toml"
HOSTILE = "\x1b[2J\x1b]0;pwned\x07\x9b31m\u202eevil\n\tname"
UNDECODABLE = os.fsdecode(b"caf\xe9-\xff")  # a directory name that is not UTF-8


def agent(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distagent", *args], capture_output=True,
                          text=True, env=env or ENV, timeout=60, errors="surrogateescape")


def hostile_logdir(root: Path) -> Path:
    records = {
        "ansi" + HOSTILE: {"status": HOSTILE, "last_step": "7", "total_steps": float("nan"),
                           "metrics": {names.LOSS: float("inf"), names.EXAMPLES_PER_SECOND: 1e308}},
        UNDECODABLE: {"status": names.STATUS_FINISHED, "last_step": 2**70, "metrics": 5,
                      "error": HOSTILE},
        "x" * 200: {"status": ["not", "a", "string"], "last_step": True, "metrics": None},
        "garbage": None,
    }
    for name, record in records.items():
        run_dir = root / name
        run_dir.mkdir(parents=True)
        text = json.dumps(record, allow_nan=True) if record is not None else "{\"status\": [[["
        (run_dir / names.RUN_JSON).write_text(text)
    return root


def assert_printable(text: str) -> None:
    for line in text.splitlines():
        assert line.isprintable(), repr(line)


def test_status_table_escapes_every_outside_string(tmp_path: Path) -> None:
    done = agent("status", str(hostile_logdir(tmp_path)))
    assert done.returncode == 0, done.stderr
    assert_printable(done.stdout)
    assert "\\x1b[2J\\x1b]0;pwned\\x07\\x9b31m\\u202eevil\\n\\tname" in done.stdout
    assert "caf\\xe9-\\xff" in done.stdout
    assert all(len(line) < 200 for line in done.stdout.splitlines())  # long names elided
    assert done.stderr == ""


def test_status_json_is_valid_whatever_run_json_holds(tmp_path: Path) -> None:
    done = agent("status", str(hostile_logdir(tmp_path)), "--json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.isascii()
    rows = json.loads(done.stdout)  # strict: NaN and Infinity would fail here
    by_name = {r["name"]: r for r in rows}
    assert by_name["caf\\xe9-\\xff"]["error"] == HOSTILE  # JSON keeps the value, escaped as JSON
    assert by_name["ansi" + HOSTILE]["metrics"][names.LOSS] is None


def test_plan_escapes_config_values(tmp_path: Path) -> None:
    name = "run\x1b[31m-" + "n" * 600
    done = agent("plan", str(QUICKSTART), "--set", f"run.name={name}",
                 "--set", "strategy.cpu_replicas=1")
    assert done.returncode == 0, done.stderr
    assert_printable(done.stdout)
    assert "run\\x1b[31m-" in done.stdout and "…" in done.stdout


CLOSED_PIPE = [
    ["--help"], ["--version"], ["status", "{logdir}"], ["status", "{logdir}", "--json"],
    ["stop", "{logdir}/" + UNDECODABLE], ["plan", str(QUICKSTART), "--json"],
]


@pytest.mark.parametrize("command", CLOSED_PIPE, ids=[" ".join(c)[:30] for c in CLOSED_PIPE])
def test_a_closed_pipe_ends_quietly(tmp_path: Path, command: list[str]) -> None:
    """`distagent ... | head -1`, with the reader gone before the first write."""
    logdir = hostile_logdir(tmp_path)
    for i in range(300):  # more than a pipe buffer of rows
        (logdir / f"run-{i:03d}").mkdir()
        (logdir / f"run-{i:03d}" / names.RUN_JSON).write_text('{"status": "finished"}')
    read_end, write_end = os.pipe()
    os.close(read_end)
    args = [a.replace("{logdir}", str(logdir)) for a in command]
    done = subprocess.run([sys.executable, "-m", "distagent", *args], stdout=write_end,
                          stderr=subprocess.PIPE, text=True, env=ENV, timeout=120)
    os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode in (0, BROKEN_PIPE_EXIT)


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_strict_narrow_encoding_never_raises(tmp_path: Path, encoding: str) -> None:
    env = {**ENV, "PYTHONIOENCODING": f"{encoding}:strict"}
    logdir = hostile_logdir(tmp_path)
    (logdir / "naïve-×-日本").mkdir()
    (logdir / "naïve-×-日本" / names.RUN_JSON).write_text('{"status": "stopped"}')
    table = agent("status", str(logdir), env=env)
    assert table.returncode == 0, table.stderr
    assert "na" in table.stdout and "Traceback" not in table.stderr
    missing = agent("stop", str(logdir / "日本"), env=env)
    assert missing.returncode == 2
    assert "Traceback" not in missing.stderr and "\\u65e5\\u672c" in missing.stderr
