"""Names that would print alike (one holding undecodable bytes, one the same text escaped, or
two long ones elided alike) are told apart by one rule, " #2", wherever keys are built: tags and
hparams in JSON and `--once` text, run and job names, the dashboard's rows and labels."""

from __future__ import annotations

import io
import json
import os
import struct
import tempfile
from contextlib import redirect_stdout
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distcore.tfrecord.wire as s
from distcore.events import load_once
from distcore.events.jsonify import run_to_json, runs_to_json
from distcore.textsafe import json_names, json_text, name_suffixes, shown_names, terminal_text
from distmon.cli import main
from tests.core.wire_builder import field
from tests.kit.writers import record, varint

EVENT_FILE = "events.out.tfevents.1.host"


def _scalar(tag: bytes, step: int, value: float) -> bytes:
    val = field(s.K_TAG, tag) + bytes([s.K_SIMPLE]) + struct.pack("<f", value)
    summary = field(s.K_SUMMARY, field(s.K_VALUE, val))
    return bytes([s.K_WALL]) + struct.pack("<d", 1.0) + bytes([s.K_STEP]) + varint(step) + summary


def _once(root: Path, *flags: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--once", "--poll", "--no-gpu", *flags, str(root)]) == 0
    return out.getvalue()


def test_a_byte_and_its_escaped_text_are_two_keys(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    tags = [b"a\xff", b"a\\xff", b"a\\xff #2"]
    data = b"".join(record(_scalar(t, 1, float(i))) for i, t in enumerate(tags))
    (tmp_path / "run" / EVENT_FILE).write_bytes(data)
    (run,) = load_once([tmp_path])
    doc = run_to_json(run)
    by_value = {key: entry["last_value"] for key, entry in doc["scalars"].items()}
    # Code-point order: the plain texts first, the undecodable byte after them.
    assert by_value == {"a\\xff": 1.0, "a\\xff #2": 2.0, "a\\xff #3": 0.0}
    (shown,) = json.loads(_once(tmp_path, "--json"))["runs"]
    assert {k: v["last_value"] for k, v in shown["scalars"].items()} == by_value
    text = _once(tmp_path)
    assert all(f"  {key} " in text for key in by_value)


def test_run_names_that_print_alike_are_two_runs(tmp_path: Path) -> None:
    for name in (os.fsdecode(b"r\xff"), "r\\xff"):
        (tmp_path / name).mkdir()
        (tmp_path / name / EVENT_FILE).write_bytes(record(_scalar(b"loss", 1, 1.0)))
    doc = json.loads(_once(tmp_path, "--json"))
    assert sorted(r["name"] for r in doc["runs"]) == ["r\\xff", "r\\xff #2"]
    assert sorted(j["name"] for j in doc["jobs"]) == ["r\\xff", "r\\xff #2"]
    assert sorted(r["name"] for r in runs_to_json(load_once([tmp_path]))) == [
        "r\\xff", "r\\xff #2"
    ]


# Names as a writer can give them: any bytes (decoded as the reader decodes tags), and the
# escaped texts of such bytes, which are what collide with them.
_RAW = st.binary(max_size=12) | st.sampled_from([b"\xff", b"a\xfeb", b"\x1b[31m", b"x" * 70])
NAMES = st.lists(
    _RAW.flatmap(lambda b: st.sampled_from([b, b.decode("utf-8", "backslashreplace").encode()])),
    min_size=1, max_size=8, unique=True,
)


@settings(max_examples=200, deadline=None)
@given(NAMES, st.sampled_from([None, 8, 60]))
def test_any_names_stay_apart_in_every_form(raw: list[bytes], limit: int | None) -> None:
    names = [b.decode("utf-8", "surrogateescape") for b in raw]
    as_json = json_names(names)
    shown = shown_names(names, limit)
    assert len(set(as_json.values())) == len(names)
    assert len(set(shown.values())) == len(names)
    # One rule: the JSON and the terminal form carry the same suffix (unelided).
    suffixes = name_suffixes(names)
    for name in names:
        assert as_json[name] == json_text(name) + suffixes[name]
        if limit is None:
            assert shown[name] == terminal_text(name) + suffixes[name]
        json.dumps(as_json[name], ensure_ascii=False).encode()  # valid, strict UTF-8
        assert not any(ord(c) < 0x20 or 0xD800 <= ord(c) < 0xE000 for c in shown[name])
    # Whichever order the names were read in.
    assert name_suffixes(reversed(names)) == suffixes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(NAMES)
def test_any_tag_bytes_through_the_reader_and_once_json(raw: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "run").mkdir()
        data = b"".join(record(_scalar(t, 1, float(i))) for i, t in enumerate(raw))
        (root / "run" / EVENT_FILE).write_bytes(data)
        (run,) = json.loads(_once(root, "--json"))["runs"]
        # Every tag is a key of its own, with its own value.
        values = sorted(v["last_value"] for v in run["scalars"].values())
        assert values == [float(i) for i in range(len(raw))]
        text = _once(root)
        assert text.count(" n=1\n") == len(raw)
