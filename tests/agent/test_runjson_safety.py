"""Any run.json, of any file type, through the real CLIs: `distmon --once --json`,
`distagent status --json`, `distagent stop` and `distagent start` as subprocesses.

A FIFO used to hang all of them (a plain `open` of a FIFO waits for a writer) and nesting deeper
than the recursion limit was a traceback in `status --json`. Now one opener
(`distcore.safefile`) refuses non-regular files, links, oversized and over-nested documents;
such a run.json reads as absent to distagent, is its job's row saying "unreadable" (and why) in
distmon, and the rest of the logdir is shown as usual.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distagent.commands.status import _json_ready
from distcore import names
from distcore.jobs.agent import MAX_RUN_JSON_BYTES, read_run_json
from distcore.safefile import MAX_JSON_DEPTH, UnsafeFile, load_json, read_regular
from tests.kit.writers import scalar_records

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
TIMEOUT = 60  # a hang is a failure (TimeoutExpired), not a stuck suite
AGENT_STATUSES = ("finished", "failed", "stopped", "diverged")


def cli(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          env=ENV, timeout=TIMEOUT, stdin=subprocess.DEVNULL)


def nested(depth: int) -> str:
    return '{"status": "finished", "metrics": {"loss": ' + "[" * depth + "]" * depth + "}}"


def _socket(path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(path))
    finally:
        sock.close()  # the socket file stays


def _link_to_fifo(path: Path, _: Any) -> None:
    os.mkfifo(path.with_name("fifo"))
    path.symlink_to("fifo")


def _link_to_regular(path: Path, status: Any) -> None:
    path.with_name("real.json").write_text(json.dumps({"status": status}))
    path.symlink_to("real.json")


def _unreadable(path: Path, _: Any) -> None:
    path.write_text("{}")
    path.chmod(0)


# Each kind makes `path` (a run.json) something hostile; the value is what the readers must
# conclude: the status it records when it is a readable regular file, else None.
Maker = Callable[[Path, Any], object]
KINDS: dict[str, Maker] = {
    "fifo": lambda p, _: os.mkfifo(p),
    "directory": lambda p, _: p.mkdir(),
    "socket": lambda p, _: _socket(p),
    "link-to-dev-zero": lambda p, _: p.symlink_to("/dev/zero"),
    "link-to-fifo": _link_to_fifo,
    "link-to-regular": _link_to_regular,
    "link-loop": lambda p, _: p.symlink_to(p.name),
    "dangling-link": lambda p, _: p.symlink_to("nowhere"),
    "too-big": lambda p, _: os.truncate(_touch(p), MAX_RUN_JSON_BYTES + 1),
    "unreadable": _unreadable,
}


def _touch(path: Path) -> Path:
    path.write_bytes(b"")
    return path


UNREADABLE = object()
NOTHING_THERE = ("link-loop", "dangling-link")  # no file to see: the job is its files' alone


def make_run_json(path: Path, kind: str, value: Any) -> Any:
    """Make `path` of `kind`; the status a reader should find there (UNREADABLE: none)."""
    if kind == "object":
        path.write_text(json.dumps({"status": value, "last_step": 3}))
        return value
    if kind == "nested":
        path.write_text(nested(value))
        return "finished" if value <= MAX_JSON_DEPTH - 3 else UNREADABLE
    if kind == "bytes":
        path.write_bytes(value)
        try:
            doc = json.loads(value)
        except (ValueError, RecursionError):
            return UNREADABLE
        return doc.get("status") if isinstance(doc, dict) else UNREADABLE
    KINDS[kind](path, value)
    return UNREADABLE


ENTRY = st.one_of(
    st.tuples(st.just("object"), st.sampled_from(AGENT_STATUSES) | st.integers() | st.none()),
    st.tuples(st.just("nested"), st.sampled_from([1, 10, MAX_JSON_DEPTH, 500, 990, 5000])),
    st.tuples(st.just("bytes"), st.binary(max_size=64) | st.sampled_from(
        [b"[" * 100000, b'{"status": "finished"', b"\xff\xfe{}", b'{"status": "\\ud800"}'])),
    st.tuples(st.sampled_from(sorted(KINDS)), st.sampled_from(AGENT_STATUSES)),
)


def build_logdir(root: Path, entries: list[tuple[str, Any]]) -> dict[str, Any]:
    expected = {}
    for i, (kind, value) in enumerate(entries):
        job = root / f"job{i}"
        (job / names.TRAIN_DIR).mkdir(parents=True)
        (job / names.TRAIN_DIR / "events.out.tfevents.1.h").write_bytes(
            scalar_records("loss", [(1, 0.5)]))
        expected[job.name] = make_run_json(job / names.RUN_JSON, kind, value)
    return expected


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-0 file: run as a user")
def test_an_unreadable_run_json_is_absent(tmp_path: Path) -> None:
    assert make_run_json(tmp_path / names.RUN_JSON, "unreadable", None) is UNREADABLE
    assert read_run_json(tmp_path) is None


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(ENTRY, min_size=1, max_size=6))
def test_any_run_json_through_distmon_and_distagent(
    tmp_path_factory: pytest.TempPathFactory, entries: list[tuple[str, Any]]
) -> None:
    entries = [e for e in entries if e[0] != "unreadable" or os.geteuid() != 0]
    root = tmp_path_factory.mktemp("logdir")
    expected = build_logdir(root, entries)

    once = cli("distmon", "--once", "--json", "--no-gpu", str(root))
    assert once.returncode == 0, once.stderr
    assert "Traceback" not in once.stderr
    jobs = {job["name"]: job for job in json.loads(once.stdout)["jobs"]}
    assert sorted(jobs) == sorted(expected)  # every job shown, whatever its run.json
    kinds = {f"job{i}": kind for i, (kind, _) in enumerate(entries)}
    for name, status in expected.items():
        if status in AGENT_STATUSES:
            assert jobs[name]["status"] == status
        elif status is UNREADABLE and kinds[name] not in NOTHING_THERE:
            assert jobs[name]["status"] == "unreadable", jobs[name]
        else:  # no agent status to go by: the files' own
            assert jobs[name]["status"] in ("live", "idle", "stale", "empty"), jobs[name]

    table = cli("distagent", "status", str(root), "--json")
    assert table.returncode == 0, table.stderr
    assert "Traceback" not in table.stderr
    rows = {row["name"]: row for row in json.loads(table.stdout)}
    # Every run listed, whatever its run.json; its status only where it is readable, else why.
    assert sorted(rows) == sorted(expected)
    for name, row in rows.items():
        want = None if expected[name] is UNREADABLE else _json_ready(expected[name])
        assert row["status"] == want, (name, row)
        assert (row["problem"] is None) == (expected[name] is not UNREADABLE), (name, row)


HOSTILE_KINDS = [
    ("fifo", "a FIFO, not a regular file"), ("link-to-fifo", "a symbolic link (not followed)"),
    ("link-to-dev-zero", "a symbolic link (not followed)"),
    ("directory", "a directory, not a regular file"), ("too-big", "larger than 16777216 bytes"),
    ("socket", "No such device or address"),  # open(2) on a socket: ENXIO
]


@pytest.mark.parametrize(("kind", "why"), HOSTILE_KINDS)
def test_stop_on_a_hostile_run_json_is_one_line(tmp_path: Path, kind: str, why: str) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    KINDS[kind](run_dir / names.RUN_JSON, None)
    stop = cli("distagent", "stop", str(run_dir), "--timeout", "1")
    assert stop.returncode == 2
    assert stop.stderr == f"distagent: {run_dir}: no readable {names.RUN_JSON} ({why}; not a " \
                          "distagent run directory?)\n"


@pytest.mark.parametrize(("kind", "why"), HOSTILE_KINDS)
def test_status_lists_a_run_whose_run_json_is_hostile_and_says_why(
    tmp_path: Path, kind: str, why: str
) -> None:
    """Never dropped, never a hang on opening (a FIFO blocks a plain open until a writer
    comes): the run is listed "unreadable", the reason under the table and in JSON."""
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / names.RUN_JSON).write_text('{"status": "finished", "last_step": 3}')
    (tmp_path / "bad").mkdir()
    KINDS[kind](tmp_path / "bad" / names.RUN_JSON, None)
    table = cli("distagent", "status", str(tmp_path))
    assert table.returncode == 0 and table.stderr == "", table.stderr
    lines = table.stdout.splitlines()
    assert lines[1].split() == ["bad", "unreadable", "-/-", "-", "-", "-"]
    assert lines[2].split()[:2] == ["good", "finished"]
    assert lines[3:] == [f"warning: bad: {names.RUN_JSON} unreadable: {why}"]
    rows = {r["name"]: r for r in json.loads(cli("distagent", "status", str(tmp_path),
                                                 "--json").stdout)}
    assert rows["bad"]["status"] is None
    assert rows["bad"]["problem"] == f"{names.RUN_JSON} unreadable: {why}"
    assert rows["good"]["status"] == "finished" and rows["good"]["problem"] is None


def test_the_opener_says_why(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to("fifo")
    (tmp_path / "deep.json").write_text("[" * 65 + "]" * 65)
    (tmp_path / "ok.json").write_text('{"a": [1, {"b": 2}]}')
    with pytest.raises(UnsafeFile, match="a FIFO, not a regular file"):
        read_regular(tmp_path / "fifo", 10)
    with pytest.raises(UnsafeFile, match="symbolic link"):
        read_regular(tmp_path / "link", 10, follow=False)
    with pytest.raises(UnsafeFile, match="a directory"):
        read_regular(tmp_path, 10)
    with pytest.raises(UnsafeFile, match="larger than 3 bytes"):
        read_regular(tmp_path / "ok.json", 3)
    with pytest.raises(ValueError, match="nested deeper than 64"):
        load_json(tmp_path / "deep.json", 1000)
    assert load_json(tmp_path / "ok.json", 1000) == {"a": [1, {"b": 2}]}


@pytest.mark.slow
def test_start_over_a_fifo_run_json_trains_and_writes_a_file(tmp_path: Path) -> None:
    """`start` used to hang reading the FIFO (is the run already running?); now it is no
    record, and the job writes a regular run.json in its place."""
    quickstart = Path(__file__).resolve().parents[2] / "sample_configs" / "quickstart.toml"
    run_dir = tmp_path / "fifo-run"
    run_dir.mkdir()
    os.mkfifo(run_dir / names.RUN_JSON)
    sets = {"run.logdir": str(tmp_path), "run.name": "fifo-run", "strategy.cpu_replicas": 1,
            "data.per_replica_batch_size": 8, "data.validation_fraction": 0.0,
            "data.synthetic.num_examples": 32, "data.synthetic.input_shape": "[4, 4, 1]",
            "train.epochs": 1, "model.hidden_units": "[8]"}
    args = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    done = subprocess.run([sys.executable, "-m", "distagent", "start", str(quickstart), *args],
                          capture_output=True, text=True, env=ENV, timeout=240,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (run_dir / names.RUN_JSON).is_file()
    assert (read_run_json(run_dir) or {}).get("status") == names.STATUS_FINISHED


@pytest.mark.parametrize("kind", ["fifo", "dangling-link", "directory"])
def test_detach_over_a_planted_output_log_is_one_line(tmp_path: Path, kind: str) -> None:
    """`start --detach` appends the job's output to `<run>/output.log`: a FIFO there used to
    block the open, a link to redirect the output. Neither is opened; nothing starts."""
    quickstart = Path(__file__).resolve().parents[2] / "sample_configs" / "quickstart.toml"
    run_dir = tmp_path / "planted"
    run_dir.mkdir()
    KINDS[kind](run_dir / "output.log", None)
    done = cli("distagent", "start", str(quickstart), "--detach", "--set",
               f"run.logdir={tmp_path}", "--set", "run.name=planted")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"distagent: {run_dir}/output.log: cannot write the job's output (")
    assert not (run_dir / names.RUN_JSON).exists()


def test_status_reads_numbers_as_distmon_does(tmp_path: Path) -> None:
    """A 400-digit step, pid and total, an input wait of 1e40: unknown, as in distmon."""
    huge = int("9" * 400)
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / names.RUN_JSON).write_text(json.dumps({
        "status": "finished", "pid": huge, "last_step": huge, "total_steps": huge,
        "metrics": {names.INPUT_WAIT_FRACTION: 1e40, names.MFU: -5, names.LOSS: 0.25}}))
    table = cli("distagent", "status", str(tmp_path), "--json")
    assert table.returncode == 0, table.stderr
    (row,) = json.loads(table.stdout)
    assert (row["pid"], row["last_step"], row["total_steps"]) == (None, None, None)
    assert row["metrics"] == {names.INPUT_WAIT_FRACTION: None, names.MFU: None, names.LOSS: 0.25}
    text = cli("distagent", "status", str(tmp_path))
    assert text.returncode == 0 and "job  finished  -/-   0.2500" in text.stdout, text.stdout
