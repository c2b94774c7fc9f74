"""distcore.textsafe: what outside strings look like on a terminal and in JSON."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcore.textsafe import (
    ELLIPSIS,
    elide,
    escaped_text,
    json_float,
    json_safe,
    json_text,
    spreadsheet_cell,
    terminal_safe,
    terminal_text,
)


def undecodable(raw: bytes) -> str:
    """A name as the reader decodes it from an event file."""
    return raw.decode("utf-8", "surrogateescape")


@pytest.mark.parametrize(
    ("given_text", "shown"),
    [
        ("loss", "loss"),
        ("épochs/accuracy", "épochs/accuracy"),
        ("a\nb\tc\rd", "a\\nb\\tc\\rd"),
        ("\x00\x07\x08\x1f", "\\x00\\x07\\x08\\x1f"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),  # ANSI SGR
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # OSC: set the window title
        ("\x1b]8;;http://x\x1b\\link", "\\x1b]8;;http://x\\x1b\\link"),  # OSC 8 hyperlink
        ("\x9b31m", "\\x9b31m"),  # C1 CSI, one character
        ("\x7f", "\\x7f"),
        ("\u2028\u2029", "\\u2028\\u2029"),
        ("abc\u202edcba", "abc\\u202edcba"),  # bidi override (Trojan Source)
        ("\u2066x\u2069\u200e\u200f", "\\u2066x\\u2069\\u200e\\u200f"),
        (undecodable(b"tag\xff\xfe"), "tag\\xff\\xfe"),
        (undecodable(b"\xc3"), "\\xc3"),  # a cut multi-byte sequence
        ("\ud800", "\\ud800"),  # a lone surrogate that is not an undecodable byte
        ("a\u200bb\ufeff", "a\\u200bb\\ufeff"),  # zero-width space, BOM: look-alike names
        ("x\U000e0041\U000e007f", "x\\U000e0041\\U000e007f"),  # invisible "tag" characters
        ("\u202f\u00a0é", "\u202f\u00a0é"),  # visible spaces and letters stay
        (12.5, "12.5"),
        (None, "None"),
    ],
)
def test_terminal_text_escapes_what_a_terminal_would_act_on(given_text: object, shown: str) -> None:
    assert terminal_text(given_text) == shown


def test_names_that_differ_in_undecodable_bytes_stay_different() -> None:
    a, b = undecodable(b"loss\xff"), undecodable(b"loss\xfe")
    assert a != b
    assert terminal_text(a) != terminal_text(b)
    assert json_text(a) != json_text(b)


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short", 10, "short"),
        ("exactly10!", 10, "exactly10!"),
        ("abcdefghijk", 10, "abcdef" + ELLIPSIS + "ijk"),
        ("abcdef", 1, ELLIPSIS),
        ("abcdef", 0, ""),
        ("abcdef", -3, ""),
        ("abcdef", 2, "a" + ELLIPSIS),
    ],
)
def test_elide_keeps_start_and_end(text: str, limit: int, expected: str) -> None:
    assert elide(text, limit) == expected


def test_ten_thousand_character_name_is_elided_after_escaping() -> None:
    name = "\x1b" * 5000 + "x" * 5000
    shown = terminal_text(name, 40)
    assert len(shown) == 40
    assert shown.startswith("\\x1b") and shown.endswith("x" * 13)
    assert shown.isprintable()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "plain"),
        ("newline\nstays", "newline\nstays"),  # json.dumps escapes control characters itself
        ("ünïcode", "ünïcode"),
        (undecodable(b"a\x80b"), "a\\x80b"),
        ("\udfff", "\\udfff"),
        ("\ud83d", "\\ud83d"),  # half of a surrogate pair, as a bad \u escape in run.json gives
    ],
)
def test_json_text_writes_undecodable_bytes_one_way(text: str, expected: str) -> None:
    assert json_text(text) == expected
    json.dumps(json_text(text), ensure_ascii=False).encode("utf-8")  # strict UTF-8 works


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (math.nan, "nan"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (1e300, 1e300),
        (-0.0, -0.0),
    ],
)
def test_json_float(value: float, expected: float | str) -> None:
    assert json_float(value) == expected


def test_json_safe_makes_any_document_dumpable() -> None:
    doc = {
        undecodable(b"\xff"): [math.nan, (math.inf, -math.inf)],
        "ok": {"n": np.int64(2**62), "f": np.float32("nan"), "b": True, "none": None},
        3: object,
        "\ud800": "\udc80",
    }
    text = json.dumps(json_safe(doc), allow_nan=False, ensure_ascii=False)
    back = json.loads(text.encode("utf-8"))
    assert back["\\xff"] == ["nan", ["inf", "-inf"]]
    assert back["ok"] == {"n": 2**62, "f": "nan", "b": True, "none": None}
    assert back["3"] == str(object)
    assert back["\\ud800"] == "\\x80"


@pytest.mark.parametrize("convert", [json_safe, lambda doc: terminal_safe(doc, 12)])
def test_keys_that_look_alike_once_shown_stay_apart(convert: Any) -> None:
    doc = {undecodable(b"t\xff"): 1, "t\\xff": 2, "t\\xff #2": 3}
    shown = convert(doc)
    # One rule (name_suffixes): the raw names in code-point order, the plain texts first.
    assert shown == {"t\\xff #3": 1, "t\\xff": 2, "t\\xff #2": 3}


def test_terminal_safe_elides_alike_long_keys_apart() -> None:
    doc = {"a" * 50 + "1" + "z" * 50: 1, "a" * 50 + "2" + "z" * 50: 2}
    shown = terminal_safe(doc, 20)
    assert len(shown) == 2 and all(len(k) <= 23 for k in shown)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64) | st.text(max_size=64))
def test_any_name_is_printable_on_a_terminal_and_valid_in_json(raw: bytes | str) -> None:
    name = undecodable(raw) if isinstance(raw, bytes) else raw
    shown = terminal_text(name, 30)
    assert len(shown) <= 30
    assert all(unicodedata.category(c) not in ("Cc", "Cs") for c in shown), shown
    assert not any(c in shown for c in "\u2028\u2029\u202a\u202b\u202c\u202d\u202e")
    json.dumps(json_safe({name: name}), allow_nan=False, ensure_ascii=False).encode("utf-8")


def _reference_json_names(names: list[str]) -> dict[str, str]:
    """json_names before its fast path for plain names: every name through name_suffixes."""
    from distcore.textsafe import json_text, name_suffixes

    return {raw: json_text(raw) + suffix for raw, suffix in name_suffixes(names).items()}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab #2\\x\udcff\x1b\u202e"), max_size=5)
                | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=5),
                max_size=6))
def test_json_names_fast_path_changes_nothing(names: list[str]) -> None:
    from distcore.textsafe import json_names

    ours, reference = json_names(names), _reference_json_names(names)
    assert ours == reference and list(ours) == list(reference)


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tcmd", "'\tcmd"),
        ("\rcmd", "'\rcmd"),
        ("'=1", "''=1"),  # stays apart from "=1"
        ("run-1", "run-1"),
        ("lr=0.1", "lr=0.1"),
        ("", ""),
    ],
)
def test_spreadsheet_cell(cell: str, written: str) -> None:
    assert spreadsheet_cell(cell) == written


@given(st.text(), st.text())
def test_spreadsheet_cells_stay_distinct_and_never_start_a_formula(a: str, b: str) -> None:
    cell = spreadsheet_cell(a)
    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r"))
    assert (spreadsheet_cell(a) == spreadsheet_cell(b)) == (a == b)


_ESCAPE = re.compile(r"\\(\\|n|r|t|x[0-9a-f]{2}|u[0-9a-f]{4})")
_NAMED = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code in _NAMED:
        return _NAMED[code]
    value = int(code[1:], 16)
    if code[0] == "x" and value >= 0x80:  # an undecodable byte, as the reader decoded it
        return chr(0xDC00 + value)
    return chr(value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("loss", "loss"),
        ("a\x1b[31m", "a\\x1b[31m"),
        ("a\\x1b[31m", "a\\\\x1b[31m"),  # the text of an escape stays apart from the byte
        ("\x00\x07\r\n\t\x7f", "\\x00\\x07\\r\\n\\t\\x7f"),
        ("\x85\x9b", "\\u0085\\u009b"),  # C1: \x85 would be the undecodable byte
        (undecodable(b"\x85\xff"), "\\x85\\xff"),
        ("\ud800é", "\\ud800é"),
    ],
)
def test_escaped_text_leaves_no_control_character(text: str, expected: str) -> None:
    assert escaped_text(text) == expected


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64).map(undecodable) | st.text(max_size=64))
def test_escaped_text_is_printable_and_reversible(text: str) -> None:
    shown = escaped_text(text)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in shown)
    shown.encode("utf-8")  # no lone surrogate left
    assert _ESCAPE.sub(_unescape, shown) == text  # so distinct texts stay distinct
