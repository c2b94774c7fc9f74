"""distcore.jsonout: `--once --json`'s text, json's C encoder's of json_safe's form, part by part;
and json_safe's fast paths."""

from __future__ import annotations

import enum
import io
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


def _json(doc: Any) -> str:
    return json.dumps(doc, allow_nan=False)


def _strict(text: str) -> Any:
    """JSON as a strict reader takes it: no NaN, no infinities."""
    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} in the text")

    return json.loads(text, parse_constant=refuse)


def _expected(doc: Any) -> Any:
    """What json_safe makes of the document, as a reader gets it back."""
    return json.loads(_json(json_safe(doc)))


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"a": {}, "b": [], "c": [{}], "d": [[]]},
        {"version": 1, "runs": [{"name": "r", "scalars": {"loss": {"min": 0.5, "count": 3}}}]},
        {"x": [1, [2, [3, {"x": (4, 5)}]], "s", None, False, -0.0, 1e300, 2**70]},
        {"naïve \u2028 \x00 \"q\" \\": "émoji 🙂 \udc80"},
        {"status": Status.LIVE, "level": Level.HIGH},
        {"nested": OrderedDict(b=[1.25])},
        {"a": math.nan, "b": [math.inf, -math.inf, -0.0], "c": "\udcff x", "d": ()},
        {"k": {"x\udcff": 1, "x\\xff": 2}},  # keys that print alike: json_safe keeps them apart
        {"n": np.float64(1.5), "i": np.int64(3), "f": np.float32(math.nan)},
        {"o": OrderedDict(a=[OrderedDict(b=math.nan)]), "x": [object()]},
        {"k": {2: "i", 1.5: "d", math.inf: "inf"}},  # keys as json writes them, or as json_safe
    ],
)
def test_written_as_json_safe_makes_it(doc: Any) -> None:
    assert _strict(jsonout.dumps(doc)) == _expected(doc)


def test_listed_parts_are_written_one_by_one() -> None:
    made: list[int] = []

    def runs() -> Any:
        for i in range(3):
            made.append(i)
            yield {"i": i, "v": math.nan if i == 1 else i / 2}

    out = io.StringIO()
    jsonout.write({"version": 2, "runs": runs(), "none": iter(()), "after": "x"}, out)
    assert made == [0, 1, 2]
    assert _strict(out.getvalue()) == {
        "version": 2, "runs": [{"i": 0, "v": 0.0}, {"i": 1, "v": "nan"}, {"i": 2, "v": 1.0}],
        "none": [], "after": "x"}
    assert out.getvalue().endswith("}\n")


def test_a_cycle_fails_as_json_safe_does() -> None:
    doc: dict[str, Any] = {"a": []}
    doc["a"].append(doc)
    with pytest.raises(RecursionError):
        jsonout.dumps({"doc": doc})


_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
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


_TEXT = st.text(max_size=6) | st.binary(max_size=6).map(
    lambda raw: raw.decode("utf-8", "surrogateescape"))
_STR_KEYED = st.recursive(
    _ANY_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_TEXT, _STR_KEYED, max_size=4))
def test_any_document_is_strict_json_of_json_safe(doc: dict[str, Any]) -> None:
    """Whatever the parts hold (NaN, infinities, control characters, undecodable bytes,
    numpy's numbers), the text is strict JSON of what json_safe makes of them."""
    assert _strict(jsonout.dumps(doc)) == json.loads(_json(_reference_json_safe(doc)))
