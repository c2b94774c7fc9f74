"""distcore.jsonout: `--once --json`'s text, byte for byte json's of json_safe's, and json_safe's
fast paths."""

from __future__ import annotations

import enum
import json
import math
import numbers
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcore import jsonout
from distcore.textsafe import _distinct_keys, json_float, json_safe, json_text


class Level(enum.IntEnum):
    HIGH = 3


class Status(enum.StrEnum):
    LIVE = "live"


class Shown(str):
    """A key whose str() is not its text: json_safe writes what str() says."""

    def __str__(self) -> str:
        return f"shown {super().__str__()}"


def _json(doc: Any) -> str:
    return json.dumps(doc, indent=2, allow_nan=False)


def _expected(doc: Any) -> str:
    return _json(json_safe(doc))


@pytest.mark.parametrize(
    "doc",
    [
        {},
        [],
        (),
        "",
        0,
        -0.0,
        0.1,
        1e300,
        2**70,
        True,
        None,
        {"a": {}, "b": [], "c": [{}], "d": [[]]},
        {"version": 1, "runs": [{"name": "r", "scalars": {"loss": {"min": 0.5, "count": 3}}}]},
        [1, [2, [3, {"x": (4, 5)}]], "s", None, False],
        {"naïve \u2028 \x00 \"q\" \\": "émoji 🙂 \udc80"},
        {"status": Status.LIVE, Status.LIVE: 1},
        {"level": Level.HIGH},  # an int subclass: json's rule (its int text), via json
        {1: "a", None: "b", False: "c", 1.5: "d"},  # keys json turns into strings
        OrderedDict(a=1),
        {"nested": OrderedDict(b=[1.25])},
    ],
)
def test_dumps_is_json_byte_for_byte(doc: Any) -> None:
    assert jsonout.dumps(doc) == _expected(doc)


def test_a_json_ready_document_is_json_s_own_text() -> None:
    doc = {"version": 1, "runs": [{"name": "r", "loss": [0.5, -0.0, 1e300], "tags": []}]}
    assert jsonout.dumps(doc) == _json(doc)


def test_a_cycle_fails_as_json_safe_does() -> None:
    doc: dict[str, Any] = {"a": []}
    doc["a"].append(doc)
    with pytest.raises(RecursionError):
        jsonout.dumps(doc)


_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_DOCS = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_DOCS)
def test_any_json_ready_document_dumps_as_json_does(doc: Any) -> None:
    assert jsonout.dumps(doc) == _json(doc)
    assert jsonout.dumps(doc) == _expected(doc)


def _reference_json_safe(value: Any) -> Any:
    """json_safe before its fast paths: every value through the abstract checks."""
    if isinstance(value, str):
        return json_text(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return json_float(float(value))
    if isinstance(value, Mapping):
        return _distinct_keys(value, json_text, _reference_json_safe)
    if isinstance(value, list | tuple):
        return [_reference_json_safe(v) for v in value]
    return json_text(str(value))


_ANY_SCALARS = _SCALARS | st.floats() | st.binary(max_size=6).map(
    lambda raw: raw.decode("utf-8", "surrogateescape")
) | st.integers(-(2**63), 2**63 - 1).map(np.int64) | st.floats(width=32).map(np.float32)
_ANY_DOCS = st.recursive(
    _ANY_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(st.text(max_size=4) | st.integers(0, 3) | _ANY_SCALARS, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_ANY_DOCS)
def test_json_safe_fast_paths_change_nothing(doc: Any) -> None:
    ours, reference = json_safe(doc), _reference_json_safe(doc)
    assert _json(ours) == _json(reference)
    assert type(ours) is type(reference)


@settings(max_examples=300, deadline=None)
@given(_ANY_DOCS)
def test_one_walk_writes_what_json_safe_then_json_write(doc: Any) -> None:
    """dumps (--once --json's one walk) is json.dumps of the reference json_safe."""
    assert jsonout.dumps(doc) == _json(_reference_json_safe(doc))


@pytest.mark.parametrize(
    "doc",
    [
        {"a": math.nan, "b": [math.inf, -math.inf, -0.0], "c": "\udcff x", "d": ()},
        {"x\udcff": 1, "x\\xff": 2},  # keys that print alike: json_safe keeps them apart
        {"n": np.float64(1.5), "i": np.int64(3), "s": Status.LIVE, "l": Level.HIGH},
        OrderedDict(a=[OrderedDict(b=math.nan)]),
        {1: "a", None: "b"},
        [object()],
        # A key written before, then as a str subclass (json_safe's rules) and at other depths.
        [{"live": 1, "x": 2}, {Status.LIVE: 3}, {"x": {"live": {"x": 4}}}, {"x": 5, "live": 6}],
        [{"k": 1}, {Shown("k"): 2}, {"k": 3}],
    ],
)
def test_one_walk_on_what_json_safe_rewrites(doc: Any) -> None:
    assert jsonout.dumps(doc) == _expected(doc)


def test_one_walk_too_deep_fails_as_the_two_walks_do() -> None:
    doc: Any = [1.0]
    for _ in range(100_000):
        doc = [doc]
    with pytest.raises(RecursionError):
        _expected(doc)
    with pytest.raises(RecursionError):
        jsonout.dumps(doc)
