"""A user's "package.module:function", imported and checked before anything calls it.

The model, the loss, the metrics and the data factory of a job may all be the user's own code:
each is named "package.module:function" and imported from the current directory first (see
commands/start.py's `user_code_path`). Anything that stops the import or finds no function is
one line naming the config key, never a traceback.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from distcore.errors import ConfigError

SPEC = re.compile(r"[\w.]+:\w+")


def is_spec(name: str) -> bool:
    """"package.module:function" (not a builtin's name)."""
    return SPEC.fullmatch(name) is not None


def add_cwd_to_path() -> None:
    """User code is imported from the current directory first, whoever started the process."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def import_function(spec: str, key: str) -> Callable[..., Any]:
    """The callable `spec` names; a ConfigError naming `key` when it cannot be had. Importing
    user code runs it: any exception there is the user's, said in one line."""
    add_cwd_to_path()
    module_name, _, attr = spec.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), attr)
    except AttributeError:
        raise ConfigError("config", key, f"{spec!r}: module {module_name} has no {attr}") from None
    except Exception as err:  # the user's module failed to import: say how
        raise ConfigError("config", key, f"cannot import {spec!r}: {first_line(err)}") from None
    if not callable(function):
        raise ConfigError("config", key, f"{spec!r} is {type(function).__name__}, not a function")
    return function


def positional_count(function: Callable[..., Any], choices: tuple[int, ...]) -> int | None:
    """The first of `choices` (argument counts) `function` can be called with; None: none fits.
    A callable without a signature (a builtin) gets the first choice."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return choices[0]
    for count in choices:
        try:
            signature.bind(*range(count))
        except TypeError:
            continue
        return count
    return None


def first_line(err: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:300]}" if text else type(err).__name__
