"""One argparse parser for every distmon and distagent command line.

Why a subclass: Python 3.11's argparse drops a value of exactly `--` (`--filter=--`) and stores
an empty *list* for an option that takes one string, so the command then crashed on
`[].strip()`. This parser refuses that as a usage error, and prints every usage error as one
escaped line (the usage itself is in --help).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from distcore.textsafe import terminal_text

USAGE_EXIT = 2
_ONE_VALUE = (None, argparse.OPTIONAL)  # the nargs that store one value, never a list


class OneLineParser(argparse.ArgumentParser):
    """argparse, with its usage errors in one line and `--opt=--` refused."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_EXIT, f"{self.prog}: {terminal_text(message, 300)} (see --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        for action in self._actions:  # subparsers are this class too: each checks its own
            value = getattr(parsed, action.dest, None)
            takes_one = action.nargs in _ONE_VALUE and not isinstance(action.default, list)
            if takes_one and isinstance(action, argparse._StoreAction) and isinstance(value, list):
                self.error(f"argument {'/'.join(action.option_strings) or action.dest}: "
                           f"expected one value, got nothing (a bare `--` is not a value)")
        return parsed, extras
