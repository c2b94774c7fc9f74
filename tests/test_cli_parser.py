"""`--opt=--` on every single-value option of both command lines: a usage error in one line.

Python 3.11's argparse stores an empty list for it, which crashed `distmon --once --filter=--`
and `distagent scale --replicas=--` (found by hypothesis in CI). The options are read from the
real parsers, so an option added later is covered without editing this table.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from distagent.cli import build_parser as agent_parser
from distagent.cli import main as agent_main
from distmon.cli import main as distmon_main
from distmon.flags import build_parser as distmon_parser


def exit_code(main: Callable[[list[str]], int], argv: list[str]) -> int | str | None:
    try:
        return main(argv)
    except SystemExit as exited:
        return exited.code


def single_value_options(parser: argparse.ArgumentParser,
                         prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Each (subcommand..., option) that stores one value, with positional arguments the
    subcommand needs left to argparse (it checks options before a missing positional)."""
    found: list[tuple[str, ...]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += single_value_options(sub, (*prefix, name))
        elif (isinstance(action, argparse._StoreAction | argparse._AppendAction)
              and action.option_strings and action.nargs in (None, "?")):
            found.append((*prefix, action.option_strings[-1]))
    return found


DISTMON = single_value_options(distmon_parser())
AGENT = single_value_options(agent_parser())


def test_the_tables_hold_the_options_users_type() -> None:
    assert ("--filter",) in DISTMON and ("--refresh",) in DISTMON
    assert ("scale", "--replicas") in AGENT and ("scale", "--steps") in AGENT
    assert ("--storage-option",) in DISTMON and ("start", "--set") in AGENT  # repeatable ones


@pytest.mark.parametrize("option", DISTMON, ids="-".join)
def test_distmon_bare_dashes(option: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code = exit_code(distmon_main, [*option[:-1], f"{option[-1]}=--", "--once", "."])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and f"argument {option[-1]}" in err and "Traceback" not in err


@pytest.mark.parametrize("option", AGENT, ids="-".join)
def test_distagent_bare_dashes(option: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code = exit_code(agent_main, [*option[:-1], f"{option[-1]}=--", "config.toml"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "--" in err and "Traceback" not in err
