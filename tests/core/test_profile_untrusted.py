"""Hostile and malformed profiles: each run's answer is a summary with clamped values and
escaped names, or "profile unreadable: <why>"; nothing raises, and the parsing subprocess is
held to its memory, CPU-time and wall-clock limits."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from distcore.profile import ProfileError, ProfileSummary, summarize
from distcore.profile.analyze import MAX_STEP, summarize_bytes
from distcore.profile.decode import MAX_PS, ProfileUnreadable
from tests.core.profile_files import (
    MS,
    Ev,
    LineSpec,
    hostile_space,
    space,
    training_steps,
    write,
)
from tests.untrusted import HOSTILE_NAMES

ESCAPES = [b"\x1b[31mred\x1b[0m", b"\x1b]0;pwned\x07", b"a\nb\tc\r", b"\xff\xfe", b"\xe2\x80\xae"]


def _strings(doc: object) -> list[str]:
    if isinstance(doc, str):
        return [doc]
    if isinstance(doc, dict):
        return [s for k, v in doc.items() for s in _strings(k) + _strings(v)]
    if isinstance(doc, list | tuple):
        return [s for v in doc for s in _strings(v)]
    return []


def test_huge_durations_and_escape_sequences_are_clamped_and_escaped(tmp_path: Path) -> None:
    answer = summarize(write(tmp_path / "hostile.xplane.pb", hostile_space()))
    assert isinstance(answer, ProfileSummary), answer
    doc = answer.to_json()
    json.dumps(doc, allow_nan=False)
    for text in _strings(doc):
        assert "\x1b" not in text and "\x07" not in text and "\n" not in text, text
        assert "\u202e" not in text and not any(0xDC80 <= ord(c) <= 0xDCFF for c in text)
    assert max(s.number for s in answer.steps) <= MAX_STEP
    assert min(s.number for s in answer.steps) >= 0
    limit_ms = MAX_PS / 1e9
    for step in answer.steps:
        assert 0 <= step.input_ms <= step.step_ms <= limit_ms
    assert all(0 <= op.self_ms <= limit_ms for op in answer.top_ops)
    assert answer.bottleneck is not None
    assert "\\x1b" in answer.bottleneck.stage.path


def test_random_bytes_are_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "random.xplane.pb"
    path.write_bytes(os.urandom(1 << 16))
    answer = summarize(path)
    assert isinstance(answer, ProfileError)
    assert answer.message.startswith("profile unreadable: ")


def test_a_file_over_the_size_cap_is_not_read(tmp_path: Path) -> None:
    path = write(tmp_path / "big.xplane.pb", space({"/host:CPU": training_steps(50)}))
    answer = summarize(path, max_bytes=path.stat().st_size - 1)
    assert isinstance(answer, ProfileError)
    assert "over the" in answer.reason and "size cap" in answer.reason
    assert isinstance(summarize(path, max_bytes=path.stat().st_size), ProfileSummary)


def test_a_missing_file_is_unreadable(tmp_path: Path) -> None:
    answer = summarize(tmp_path / "nowhere.xplane.pb")
    assert isinstance(answer, ProfileError) and "cannot be read" in answer.reason


def test_an_empty_profile_is_unreadable(tmp_path: Path) -> None:
    answer = summarize(write(tmp_path / "empty.xplane.pb", space({"/host:CPU": []})))
    assert isinstance(answer, ProfileError) and "no events" in answer.reason


def test_the_memory_limit_applies_in_the_subprocess(tmp_path: Path) -> None:
    many = [LineSpec(f"tf_Compute/{n}", [Ev(f"op{i}:MatMul", i * MS, MS) for i in range(40_000)])
            for n in range(5)]
    path = write(tmp_path / "many.xplane.pb", space({"/host:CPU": many}))
    small = summarize(path, max_memory=64 * 1024 * 1024)
    assert isinstance(small, ProfileError), small
    assert "memory limit of 64 MiB" in small.reason
    assert isinstance(summarize(path), ProfileSummary)


def test_the_time_limit_applies(tmp_path: Path) -> None:
    path = write(tmp_path / "steps.xplane.pb", space({"/host:CPU": training_steps(5)}))
    answer = summarize(path, timeout_s=0.001)
    assert isinstance(answer, ProfileError) and "took over" in answer.reason


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=400))
@example(data=b"\x0a\x05\x12\x03\xff\xfe\x1b")
@example(data=b"\x0a\x80\x80\x80\x80\x10")
def test_random_bytes_into_the_decoder_never_raise_anything_else(data: bytes) -> None:
    try:
        summary = summarize_bytes(data, "random")
    except ProfileUnreadable as exc:
        assert str(exc)
        return
    json.dumps(summary.to_json(), allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(names=st.lists(st.sampled_from(HOSTILE_NAMES) | st.binary(max_size=12), min_size=3,
                      max_size=3),
       numbers=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=4, max_size=4))
def test_hostile_names_and_times_give_a_clean_summary(names: list[bytes], numbers: list[int]
                                                      ) -> None:
    offset, duration, step, stamp = numbers
    lines = [LineSpec(names[0], [Ev(names[1], offset, duration, {"step_num": step}),
                                 Ev(b"Iterator::Root::" + names[2], offset, duration,
                                    {"id": 2, "parent_id": 1, "parallelism": step})],
                      timestamp_ns=stamp)]
    message = space({"/host:CPU": lines})
    summary = summarize_bytes(message.SerializeToString(), "hostile")
    doc = summary.to_json()
    json.dumps(doc, allow_nan=False)
    assert all("\x1b" not in s and "\n" not in s for s in _strings(doc))
    assert all(0 <= s.step_ms <= MAX_PS / 1e9 for s in summary.steps)
