"""Plain TOML data <-> the schema's frozen dataclasses, driven by their type hints.

One converter handles every field: bool, int, float, str, Literal choices, unions of those,
`tuple[X, ...]` (from TOML arrays), `tuple[tuple[str, str], ...]` (from a TOML table of
strings) and nested dataclasses (from TOML tables). Problems are collected, not raised, so a
user sees all of them at once.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin


@dataclass(frozen=True)
class Problem:
    key: str
    """Dotted key path, e.g. optimizer.scaling."""
    message: str


class _Invalid:
    """Sentinel for a value that did not convert (its problem is already recorded)."""


INVALID: Any = _Invalid()
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def convert_dataclass(cls: type, raw: Any, prefix: str, problems: list[Problem]) -> Any:
    """Build `cls` from a TOML table; unknown keys and bad values become problems."""
    if not isinstance(raw, Mapping):
        problems.append(Problem(prefix, f"expected a table, got {show(raw)}"))
        return INVALID
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in fields:
            problems.append(Problem(_join(prefix, key), _unknown_key_message(key, list(fields))))
    values: dict[str, Any] = {}
    for name in fields:
        if name in raw:
            values[name] = convert_value(hints[name], raw[name], _join(prefix, name), problems)
    # A bad value keeps its default, so that the value rules can still check everything else.
    return cls(**{k: v for k, v in values.items() if v is not INVALID})


def convert_value(hint: Any, value: Any, key: str, problems: list[Problem]) -> Any:
    before = len(problems)
    converted = _convert(hint, value, key, problems)
    if converted is INVALID and len(problems) == before:
        problems.append(Problem(key, f"expected {describe(hint)}, got {show(value)}"))
    return converted


def _convert(hint: Any, value: Any, key: str, problems: list[Problem]) -> Any:
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, Mapping):
            return INVALID
        return convert_dataclass(hint, value, key, problems)
    origin = get_origin(hint)
    if origin is Literal:
        return value if _is_choice(value, get_args(hint)) else INVALID
    if origin in (Union, types.UnionType):
        return _convert_union(get_args(hint), value)
    if origin is tuple:
        return _convert_tuple(get_args(hint), value, key, problems)
    if hint is int and _beyond_int64(value):
        # TOML integers are 64-bit, but tomllib returns any size; TensorFlow takes int64 at most.
        message = f"expected an integer within int64 (±2^63), got {show(value)}"
        problems.append(Problem(key, message))
        return INVALID
    if hint is str and isinstance(value, str) and not _is_utf8(value):
        # Only `--set` can bring these (argv bytes that are not UTF-8; the file is checked):
        # the run directory, run.json and the resolved TOML are all written as UTF-8.
        problems.append(Problem(key, f"expected UTF-8 text, got {show(value)}"))
        return INVALID
    return _convert_scalar(hint, value)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _beyond_int64(value: Any) -> bool:
    return isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX


def _is_choice(value: Any, choices: tuple[Any, ...]) -> bool:
    return any(type(value) is type(c) and value == c for c in choices)


def _convert_union(arms: tuple[Any, ...], value: Any) -> Any:
    for arm in arms:
        scratch: list[Problem] = []
        converted = _convert(arm, value, "", scratch)
        if converted is not INVALID and not scratch:
            return converted
    return INVALID


def _convert_tuple(args: tuple[Any, ...], value: Any, key: str, problems: list[Problem]) -> Any:
    item_hint = args[0]
    if _is_pair_of_str(item_hint):
        # A TOML table of strings, kept as (name, value) pairs: the dataclass stays hashable.
        if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
            return tuple((str(k), v) for k, v in value.items())
        return INVALID
    if not isinstance(value, list | tuple):
        return INVALID
    items = [_convert(item_hint, v, f"{key}[{i}]", problems) for i, v in enumerate(value)]
    return INVALID if any(i is INVALID for i in items) else tuple(items)


def _is_pair_of_str(hint: Any) -> bool:
    return get_origin(hint) is tuple and get_args(hint) == (str, str)


def _convert_scalar(hint: Any, value: Any) -> Any:
    if hint is bool:
        return value if isinstance(value, bool) else INVALID
    if hint is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else INVALID
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return float(value) if ok else INVALID
    if hint is str:
        return value if isinstance(value, str) else INVALID
    raise TypeError(f"the config schema uses an unsupported type: {hint!r}")


def describe(hint: Any) -> str:
    """What a value of this type looks like, in the words of the error messages."""
    if dataclasses.is_dataclass(hint):
        return "a table"
    origin = get_origin(hint)
    if origin is Literal:
        return _either([json.dumps(c) for c in get_args(hint)])
    if origin in (Union, types.UnionType):
        return _either([describe(a) for a in get_args(hint)])
    if origin is tuple:
        item = get_args(hint)[0]
        if _is_pair_of_str(item):
            return "a table of strings"
        return "a list of " + _plural(item)
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[hint]


def _plural(hint: Any) -> str:
    plurals = {int: "integers", float: "numbers", str: "strings", bool: "booleans"}
    return plurals.get(hint, describe(hint))


def _either(options: list[str]) -> str:
    flat: list[str] = []
    for option in options:
        quoted = option.startswith('"')
        flat.extend(option.replace(" or ", ", ").split(", ") if quoted else [option])
    return flat[0] if len(flat) == 1 else ", ".join(flat[:-1]) + " or " + flat[-1]


def show(value: Any) -> str:
    """A value as the user wrote it in TOML."""
    if isinstance(value, Mapping):
        return "a table"
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _unknown_key_message(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f'; did you mean "{close[0]}"?' if close else f" (known: {', '.join(known)})"
    return f"unknown key{hint}"


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _holds_pairs(hint: Any, value: Any) -> bool:
    """`value` is a table of strings kept as pairs (its hint, or one arm of its union, says so):
    written back as a table, not a list of lists."""
    arms = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    for arm in arms:
        args = get_args(arm)
        if get_origin(arm) is tuple and args and _is_pair_of_str(args[0]):
            return isinstance(value, tuple) and all(isinstance(v, tuple) for v in value) \
                and (bool(value) or len(arms) == 1)
    return False


def to_plain(obj: Any) -> Any:
    """A dataclass tree as plain data: tables as dicts, tuples as lists, string pairs as tables."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        hints = typing.get_type_hints(type(obj))
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if _holds_pairs(hints[f.name], value):
                out[f.name] = dict(value)
            else:
                out[f.name] = to_plain(value)
        return out
    if isinstance(obj, tuple | list):
        return [to_plain(v) for v in obj]
    return obj
