"""`--once --json`'s text: byte for byte `json.dumps(json_safe(doc), indent=2, allow_nan=False)`.

Why not json.dumps: with `indent` set, Python 3.11's json never uses its C encoder, and its
pure-Python one (a generator per container, one yield per token) was about a tenth of the
CPU of `distmon --once --json` on a 10,000-run sweep. This walks the document once, appending
each line to a list, with the C string escaper and the number reprs json itself uses. What
json_safe does more than pass on (keys it must keep apart, numpy's numbers, other types) goes
through json_safe and json.dumps themselves, so the result, or the error, is always theirs.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring_ascii
from typing import Any, Final

from distcore.textsafe import json_safe, json_text

INDENT: Final = 2
_FLOAT = float.__repr__  # what json's encoder writes a float with
_INT = int.__repr__
_CONSTANTS: Final = {None: "null", True: "true", False: "false"}


def dumps(doc: Any) -> str:
    """`json.dumps(textsafe.json_safe(doc), indent=2, allow_nan=False)`, byte for byte, in one
    walk instead of two: `--once --json` on a 10,000-run sweep built a second copy of its
    ~300,000-value document only to write it. A document nested too deep takes json's own two
    walks, so the result or the error is always theirs."""
    out: list[str] = []
    try:
        _safe_value(doc, out, "\n", {})
    except RecursionError:
        return _reference(doc)
    return "".join(out)


def _reference(doc: Any) -> str:
    return json.dumps(json_safe(doc), indent=INDENT, allow_nan=False)


def _by_json_safe(value: Any, out: list[str], newline: str) -> None:
    """A part json_safe changes more than a built-in scalar, as json writes it, indented to its
    place (json's strings never hold a raw newline, so each newline is a line break)."""
    out.append(_reference(value).replace("\n", newline))


# Per indentation, each plain key's line start (`,` newline, indentation, the key's JSON text,
# `: `): a sweep's document repeats a few dozen keys ~300,000 times, and escaping each again
# was a fifth of this walk. One per dumps call, so it never grows past one document.
_Leads = dict[str, dict[str, str]]


def _safe_leaf(value: Any) -> str | None:
    """json_safe's form of a built-in scalar, as JSON text; None for anything else."""
    kind = type(value)
    if kind is float:
        return _FLOAT(value) if math.isfinite(value) else _non_finite(value)
    if kind is str:
        return encode_basestring_ascii(value if value.isascii() else json_text(value))
    if kind is int:
        return _INT(value)
    if value is None or kind is bool:
        return _CONSTANTS[value]
    return None


def _non_finite(value: float) -> str:
    """json_float's string for NaN and the infinities, as JSON text."""
    return '"nan"' if math.isnan(value) else ('"inf"' if value > 0 else '"-inf"')


def _safe_value(value: Any, out: list[str], newline: str, leads: _Leads) -> None:
    text = _safe_leaf(value)
    if text is not None:
        out.append(text)
    else:
        _safe_container(value, out, newline, leads)


def _safe_container(value: Any, out: list[str], newline: str, leads: _Leads) -> None:
    kind = type(value)
    if kind is dict:
        _safe_dict(value, out, newline, leads)
    elif kind is list or kind is tuple:
        _safe_list(value, out, newline, leads)
    else:  # keys to keep apart, numpy's numbers, mappings, subclasses: json_safe's own rules
        _by_json_safe(value, out, newline)


def _safe_dict(value: dict[str, Any], out: list[str], newline: str, leads: _Leads) -> None:
    if not value:
        out.append("{}")
        return
    inner = newline + " " * INDENT
    keyed = leads.get(inner)
    if keyed is None:
        keyed = leads[inner] = {}
    mark = len(out)
    opening = True
    for key, item in value.items():
        lead = keyed.get(key) if type(key) is str else None
        if lead is None:
            if type(key) is not str or not key.isascii():
                # json_safe keeps only plain keys as they are: this dict takes its rules (what
                # was written of it is taken back; nothing else was changed).
                del out[mark:]
                _by_json_safe(value, out, newline)
                return
            lead = keyed[key] = f",{inner}{encode_basestring_ascii(key)}: "
        if opening:
            lead = "{" + lead[1:]
            opening = False
        # _safe_leaf, inlined: a sweep's document is ~35 leaves a run, and a call each was
        # a third of this walk.
        kind = type(item)
        if kind is float:
            out.append(lead + (_FLOAT(item) if math.isfinite(item) else _non_finite(item)))
        elif kind is str:
            out.append(lead + encode_basestring_ascii(item if item.isascii() else json_text(item)))
        elif kind is int:
            out.append(lead + _INT(item))
        elif item is None or kind is bool:
            out.append(lead + _CONSTANTS[item])
        else:
            out.append(lead)
            _safe_container(item, out, inner, leads)
    out.append(newline + "}")


def _safe_list(
    value: list[Any] | tuple[Any, ...], out: list[str], newline: str, leads: _Leads
) -> None:
    if not value:
        out.append("[]")
        return
    inner = newline + " " * INDENT
    lead, after = "[" + inner, "," + inner
    for item in value:
        text = _safe_leaf(item)
        if text is not None:
            out.append(lead + text)
        else:
            out.append(lead)
            _safe_container(item, out, inner, leads)
        lead = after
    out.append(newline + "]")
