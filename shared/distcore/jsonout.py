"""`--once --json`'s text, written part by part with json's C encoder as it is built.

A document is a mapping whose values may be iterators (a sweep's `runs` and `jobs`): each
element is made, encoded and written, then dropped, so the whole document never exists at once.
The one rule for what JSON cannot hold is textsafe.json_safe's (NaN as "nan", undecodable bytes
as `\\xNN`, other types as their text): a part json's encoder takes as it is (plain data,
finite floats, no lone surrogate) is written as json_safe would have made it; a part it refuses
(NaN, a type it does not know, a key it cannot write) or that holds a surrogate escape goes
through json_safe first. The text is json's own: compact within an element, one element of a
listed key per line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Final, TextIO

from distcore.textsafe import json_safe

# Numbers json does not know (numpy's) and other types: json_safe's form. NaN, infinities and
# keys json cannot write raise instead, and the part is written by json_safe's rules whole.
_FAST: Final = json.JSONEncoder(allow_nan=False, default=json_safe)
_SAFE: Final = json.JSONEncoder(allow_nan=False)
# ensure_ascii writes every character past U+FFFF, and every lone surrogate, as `\udXXX`:
# a part holding one may hold a lone surrogate that json_text rewrites.
_SURROGATE: Final = "\\ud"


def encode(value: Any) -> str:
    """One part as compact JSON text, by json_safe's rules."""
    try:
        text = _FAST.encode(value)
    except (ValueError, TypeError):  # NaN, infinities, a key json cannot write, a cycle
        return _SAFE.encode(json_safe(value))
    return _SAFE.encode(json_safe(value)) if _SURROGATE in text else text


def write(doc: Mapping[str, Any], out: TextIO) -> None:
    """The document as one JSON object and a newline; a value that is an iterator is written
    as a list, element by element, each on its own line."""
    lead = "{"
    for key, value in doc.items():
        out.write(f"{lead}{encode(key)}: ")
        lead = ",\n"
        if isinstance(value, Iterator):
            _write_items(value, out)
        else:
            out.write(encode(value))
    out.write("{}\n" if lead == "{" else "}\n")


def _write_items(items: Iterator[Any], out: TextIO) -> None:
    lead = "[\n"
    for item in items:
        out.write(lead + encode(item))
        lead = ",\n"
    out.write("[]" if lead == "[\n" else "\n]")


def dumps(doc: Mapping[str, Any]) -> str:
    """write's text, as a string (tests, and callers that need it whole)."""
    from io import StringIO

    out = StringIO()
    write(doc, out)
    return out.getvalue()
