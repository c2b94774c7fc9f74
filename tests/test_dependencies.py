"""pyproject.toml declares exactly what the packages import: nothing missing, nothing unused.

The dashboard's install (no extras) must cover every third-party import of distcore and distmon;
the agent extra adds what distagent imports; bench/'s tools stay in the bench extra.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = {"distcore", "distmon", "distagent", "tests"}
# Imported by distcore for the agent only, inside the function that needs it: the recorder
# writes tf.summary events from distagent's process (the dashboard never calls it).
AGENT_ONLY = {"tensorflow"}


def declared(group: str | None = None) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] if group is None else project["optional-dependencies"][group]
    return {_canonical(re.split(r"[<>=!~\[ ;]", spec, maxsplit=1)[0]) for spec in specs}


def _canonical(name: str) -> str:
    """A distribution's name as PEP 503 compares them: tomli-w and tomli_w are one project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _top(module: str) -> str:
    """The importable package: `google.protobuf` for the `google` namespace, else the first part."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "google" else parts[0]


def imported(*folders: str) -> set[str]:
    """Top-level modules imported anywhere in the folders (lazy imports included)."""
    found: set[str] = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    found |= {_top(a.name) for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(_top(node.module))
    return {m for m in found if m not in STDLIB and m not in OWN}


# `_typeshed` is the standard library's own typing module, present only to type checkers (its
# imports sit under TYPE_CHECKING): part of no distribution.
STDLIB = sys.stdlib_module_names | {"_typeshed"}


def distributions(modules: set[str]) -> set[str]:
    owners = packages_distributions()
    namespaced = {"google.protobuf": "protobuf"}
    return {_canonical(namespaced.get(m) or owners[m][0]) for m in modules}


def test_the_dashboard_declares_what_distcore_and_distmon_import() -> None:
    needed = distributions(imported("shared", "tui") - AGENT_ONLY)
    assert needed == declared()


def test_the_agent_extra_adds_what_distagent_imports() -> None:
    needed = distributions(imported("agent")) - declared()
    assert needed == declared("agent")


def test_bench_tools_are_not_dashboard_dependencies() -> None:
    assert not declared("bench") & declared()
    assert "textual-plotext" not in declared() | declared("agent")


def test_distagent_names_every_module_of_the_agent_extra() -> None:
    """What `distagent` tells a plain install to add covers all the extra brings it."""
    from distagent.cli import AGENT_MODULES

    extra = {m for m in imported("agent") if distributions({m}) <= declared("agent")}
    assert extra == AGENT_MODULES
