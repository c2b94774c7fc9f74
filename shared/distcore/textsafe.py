"""Strings from outside (tags, run names, hparams, run.json fields, error text) made safe to show.

Names are read from event files with `errors="surrogateescape"`, so bytes that are not UTF-8 stay
distinct (two tags differing only in such bytes stay two tags) and round-trip exactly. On the way
out they take one documented, deterministic form everywhere, terminal and JSON alike: each
undecodable byte is written `\\xNN` (two lowercase hex digits), as Python's "backslashreplace".

For a terminal, control characters (C0, DEL, C1 — which carry ANSI/OSC escape sequences —,
line and paragraph separators, the bidirectional overrides and the invisible format characters)
are escaped too (`\\n`, `\\t`, `\\x1b`, `\\u202e`, `\\U000e0041`), and long text is elided to
fit. JSON needs only the byte form (and any other lone surrogate, which no encoder can write as
UTF-8, as the six characters `\\udNNN`): the encoder escapes control characters itself.
`json_safe` applies that to a whole document and writes NaN and infinities as "nan", "inf",
"-inf", so that `json.dumps(json_safe(doc), allow_nan=False)` cannot fail, whatever the input
held. Keys that become equal once shown stay apart with " #2", " #3" appended, by one rule for
every name (tags, hparams, run and job names; JSON and terminal alike): `name_suffixes`.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

ELLIPSIS: Final = "…"
# Control characters a terminal would act on, the bidi controls ("Trojan Source") and other
# invisible format characters (zero-width spaces and joiners, word joiners, the BOM,
# interlinear annotations, Unicode "tag" characters) that can make two names look alike.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
    "\ud800-\udfff\U000e0000-\U000e007f]"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: an undecodable byte
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


# What `escaped_text` writes in another form: the backslash (so that an escape cannot be
# mistaken for text that reads like one), C0, DEL, C1 and lone surrogates.
_ESCAPED = re.compile("[\\\\\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    if 0x80 <= ord(char) <= 0x9F:  # C1 as \u0080: `\x80` is the undecodable byte 0x80
        return f"\\u{ord(char):04x}"
    return _escape(match)


def escaped_text(text: str) -> str:
    """`text` with no control character and no lone surrogate left, by a reversible rule, so
    distinct texts stay distinct: backslash as `\\\\`, `\\n`, `\\r`, `\\t`, other C0 and DEL
    as `\\xNN`, C1 as `\\u00NN`, undecodable bytes as `\\xNN` (0x80-0xff), other lone
    surrogates as `\\uNNNN`. For text read back by a program (Prometheus label values) rather
    than by eye: unlike `terminal_text`, a name holding the text `\\x1b` and one holding the
    byte ESC never look alike."""
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text
    return _ESCAPED.sub(_escape_one, text)


def json_text(text: str) -> str:
    """The JSON form of an outside string: undecodable bytes as `\\xNN`, other lone surrogates
    as `\\uNNNN`; nothing else changes."""
    if text.isascii():
        return text
    return _SURROGATE.sub(_escape, text)


def json_float(value: float) -> float | str:
    """JSON has no NaN or infinity: the strings "nan", "inf", "-inf" stand for them."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def json_safe(value: Any) -> Any:
    """`value` (dicts, lists, tuples, strings, numbers, None) as JSON-ready data: strings through
    `json_text` (keys too), floats through `json_float`, anything else as its `str()`."""
    # The exact built-in types first, tested by identity: `--once --json` on a sweep is ~10^6
    # values, and the abstract isinstance checks below were most of this walk's time.
    kind = type(value)
    if kind is float:
        return json_float(value)
    if kind is str:
        return json_text(value)
    if kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        if all(type(k) is str and k.isascii() for k in value):  # keys kept as they are
            return {k: json_safe(v) for k, v in value.items()}
        return _distinct_keys(value, json_text, json_safe)
    if kind is list or kind is tuple:
        return [json_safe(v) for v in value]
    return _json_safe_other(value)


def _json_safe_other(value: Any) -> Any:
    """json_safe for subclasses and other types (numpy's numbers, mappings, str subclasses)."""
    if isinstance(value, str):
        return json_text(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):  # numpy's integers too
        return int(value)
    if isinstance(value, numbers.Real):
        return json_float(float(value))
    if isinstance(value, Mapping):
        return _distinct_keys(value, json_text, json_safe)
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return json_text(str(value))


def name_suffixes(
    names: Iterable[str], form: Callable[[str], str] | None = None
) -> dict[str, str]:
    """The one rule for names that would print alike (a name holding the text `\\xff` and one
    holding the byte 0xFF): each name's suffix, "" or " #2", " #3"...

    Names are compared in their terminal form (`form`, by default unelided `terminal_text`),
    which is at least as alike as their JSON form, so one suffix serves both. They are taken
    in code-point order of the raw names, never in the order they were read, so the suffixes
    are the same whichever reader, decoder or refresh saw them first: the plain text first,
    a name with undecodable bytes after it. A suffixed form that is itself taken takes the next
    number."""
    shown = form or terminal_text
    taken: set[str] = set()
    out: dict[str, str] = {}
    for raw in sorted(set(names)):
        base = shown(raw)
        text, number = base, 1
        while text in taken:
            number += 1
            text = f"{base} #{number}"
        taken.add(text)
        out[raw] = f" #{number}" if number > 1 else ""
    return out


def json_names(names: Iterable[str]) -> dict[str, str]:
    """Each raw name's JSON form, distinct by `name_suffixes`."""
    distinct = set(names)
    if all(raw.isascii() and raw.isprintable() for raw in distinct):
        # Every form is the name itself, and the names differ: no suffix (name_suffixes'
        # answer, in its order, without escaping each name to find that out).
        return {raw: raw for raw in sorted(distinct)}
    return {raw: json_text(raw) + suffix for raw, suffix in name_suffixes(distinct).items()}


def shown_names(names: Iterable[str], limit: int | None = None) -> dict[str, str]:
    """Each raw name's terminal form (elided to `limit` with its suffix kept), distinct by
    `name_suffixes`, then again by it where elision made two alike."""
    suffixes = name_suffixes(names)
    out = {}
    for raw, suffix in suffixes.items():
        room = None if limit is None else max(1, limit - len(suffix))
        out[raw] = terminal_text(raw, room) + suffix
    if limit is not None and len(set(out.values())) < len(out):
        again = name_suffixes(out, out.__getitem__)
        out = {raw: text + again[raw] for raw, text in out.items()}
    return out


def _distinct_keys(
    value: Mapping[Any, Any], key: Callable[[str], str], item: Callable[[Any], Any]
) -> dict[str, Any]:
    """`value` with its keys through `key`: keys that become equal (two long names elided
    alike; names a caller did not make distinct first) stay apart by `name_suffixes`, so that
    no entry is lost."""
    raws = [str(raw) for raw in value]
    suffixes = name_suffixes(raws, key) if len(set(map(key, raws))) < len(raws) else {}
    out: dict[str, Any] = {}
    for raw, entry in zip(raws, value.values(), strict=True):
        shown = base = key(raw) + suffixes.get(raw, "")
        number = 1
        while shown in out:  # keys whose str() is equal (1 and "1"): in the order given
            number += 1
            shown = f"{base} #{number}"
        out[shown] = item(entry)
    return out


def elide(text: str, limit: int) -> str:
    """At most `limit` characters: the start and the end kept, an ellipsis between."""
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    if limit == 1:
        return ELLIPSIS
    head = ((limit - 1) * 2 + 2) // 3  # the start says more about a name: it gets the rounding
    tail = limit - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def terminal_text(text: object, limit: int | None = None) -> str:
    """`text` (any value; str() of non-strings) safe to print: every control character and
    undecodable byte escaped, then elided to `limit` characters when given."""
    out = text if isinstance(text, str) else str(text)
    if not out.isprintable() or not out.isascii():
        out = _UNSAFE.sub(_escape, out)
    return out if limit is None else elide(out, limit)


def terminal_safe(value: Any, limit: int | None = None) -> Any:
    """`value` (a JSON-ready document) with every string, keys too, through `terminal_text`:
    for a renderer that prints the document's fields. Keys stay distinct (see json_safe)."""
    if isinstance(value, str):
        return terminal_text(value, limit)
    if isinstance(value, Mapping):
        return _distinct_keys(
            value, lambda k: terminal_text(k, limit), lambda v: terminal_safe(v, limit)
        )
    if isinstance(value, list | tuple):
        return [terminal_safe(v, limit) for v in value]
    return value


# A spreadsheet reads a cell that starts with one of these as a formula (or, for tab and CR,
# may drop them and read what follows as one): OWASP's "CSV injection".
_FORMULA_STARTS: Final = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(text: str) -> str:
    """A string cell for CSV that a spreadsheet shows as text and never runs.

    As OWASP advises, a cell that starts like a formula gets a leading `'`. A cell that
    already starts with `'` gets one too, so two distinct cells never become equal ("=1" and
    "'=1" are written "'=1" and "''=1"). Numbers distmon writes itself are not strings and
    are never prefixed; ordinary text is unchanged."""
    return "'" + text if text.startswith((*_FORMULA_STARTS, "'")) else text
