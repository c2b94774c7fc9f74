"""One argparse parser for every distmon and distagent command line.

Why a subclass: Python 3.11's argparse drops a value of exactly `--` (`--filter=--`) and stores
an empty *list* for an option that takes one string, so the command then crashed on
`[].strip()` (and a repeatable one, `--set=--`, appended the empty list). This parser refuses
that as a usage error, and prints every usage error as one escaped line (the usage itself is in
--help).
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
            if action.nargs in _ONE_VALUE and _dropped_dashes(action, getattr(parsed, action.dest,
                                                                                None)):
                self.error(f"argument {'/'.join(action.option_strings) or action.dest}: "
                           f"expected one value, got nothing (a bare `--` is not a value)")
        return parsed, extras


def _dropped_dashes(action: argparse.Action, value: object) -> bool:
    """Whether argparse stored the empty list a dropped `--` leaves: as the value of a
    one-value option, or as one item of a repeatable one (`--set=--`)."""
    if isinstance(action, argparse._AppendAction):
        return isinstance(value, list) and any(isinstance(item, list) for item in value)
    if isinstance(action, argparse._StoreAction):
        return isinstance(value, list) and not isinstance(action.default, list)
    return False
